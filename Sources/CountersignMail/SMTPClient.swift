import CCurl
import CountersignCore
import Foundation

/// Submits one mail through libcurl's SMTP client (blocking: run it on a
/// thread of its own). The message is built with libcurl's MIME API as
/// `multipart/alternative` (plain text and HTML, quoted-printable).
struct SMTPClient {
    let configuration: SMTPConfiguration

    /// libcurl must be set up once per process before any thread uses it.
    static let globalSetup: Void = {
        _ = curl_global_init(Int(CURL_GLOBAL_DEFAULT))
    }()

    func send(_ message: MailMessage) -> MailDelivery {
        _ = Self.globalSetup
        let replies = ReplyLog()
        // The log must outlive the handle, whose header callback points at it.
        return withExtendedLifetime(replies) { perform(message, replies: replies) }
    }

    private func perform(_ message: MailMessage, replies: ReplyLog) -> MailDelivery {
        guard let from = SMTPConfiguration.mailbox(in: configuration.from) else { return .permanentFailure("invalid sender address") }
        guard let to = SMTPConfiguration.mailbox(in: message.to) else { return .permanentFailure("invalid recipient address") }
        guard !message.subject.contains(where: { $0 == "\r" || $0 == "\n" }) else { return .permanentFailure("invalid subject") }
        // Defers run last-declared first: the handle is cleaned up before the
        // buffers, lists and MIME parts it points at are freed.
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        defer { errorBuffer.deallocate() }

        let recipients = curl_slist_append(nil, "<\(to)>")
        defer { curl_slist_free_all(recipients) }
        var headers: UnsafeMutablePointer<curl_slist>?
        for header in [
            "From: \(configuration.from)", "To: \(to)", "Subject: \(message.subject)", "Date: \(Self.date())",
            "Message-ID: <\(SecureToken.recordID())@\(from.split(separator: "@").last ?? "countersign")>",
            "Content-Type: multipart/alternative",
        ] {
            headers = curl_slist_append(headers, header)
        }
        defer { curl_slist_free_all(headers) }

        guard let handle = curl_easy_init() else { return .temporaryFailure("libcurl could not start") }
        let mime = curl_mime_init(handle)
        defer { curl_mime_free(mime) }
        defer { curl_easy_cleanup(handle) }
        for (body, type) in [(message.text, "text/plain; charset=utf-8"), (message.html, "text/html; charset=utf-8")] {
            let part = curl_mime_addpart(mime)
            let bytes = Array(body.utf8)
            _ = bytes.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { curl_mime_data(part, $0.baseAddress, buffer.count) }
            }
            curl_mime_type(part, type)
            curl_mime_encoder(part, "quoted-printable")
        }

        countersign_curl_set_string(handle, CURLOPT_URL, configuration.url)
        let tls = configuration.security == .none ? CURLUSESSL_NONE : CURLUSESSL_ALL
        countersign_curl_set_long(handle, CURLOPT_USE_SSL, Int(tls.rawValue))
        countersign_curl_set_long(handle, CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2))
        // One connection per mail, closed with it: no QUIT left to wait on at cleanup.
        countersign_curl_set_long(handle, CURLOPT_FORBID_REUSE, 1)
        countersign_curl_set_long(handle, CURLOPT_SERVER_RESPONSE_TIMEOUT, min(10, configuration.timeout))
        if let caFile = configuration.caFile { countersign_curl_set_string(handle, CURLOPT_CAINFO, caFile) }
        if let user = configuration.user {
            countersign_curl_set_string(handle, CURLOPT_USERNAME, user)
            countersign_curl_set_string(handle, CURLOPT_PASSWORD, configuration.password ?? "")
        }
        countersign_curl_set_string(handle, CURLOPT_MAIL_FROM, "<\(from)>")
        countersign_curl_set_list(handle, CURLOPT_MAIL_RCPT, recipients)
        countersign_curl_set_list(handle, CURLOPT_HTTPHEADER, headers)
        countersign_curl_set_mime(handle, mime)
        countersign_curl_set_long(handle, CURLOPT_UPLOAD, 0)
        countersign_curl_set_long(handle, CURLOPT_NOSIGNAL, 1)
        countersign_curl_set_long(handle, CURLOPT_CONNECTTIMEOUT, min(10, configuration.timeout))
        countersign_curl_set_long(handle, CURLOPT_TIMEOUT, configuration.timeout)
        countersign_curl_set_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer)
        countersign_curl_set_pointer(handle, CURLOPT_HEADERDATA, Unmanaged.passUnretained(replies).toOpaque())
        countersign_curl_set_header_callback(handle) { buffer, size, count, userdata in
            guard let buffer, let userdata else { return 0 }
            let length = size * count
            let line = String(decoding: UnsafeRawBufferPointer(start: buffer, count: length), as: UTF8.self)
            Unmanaged<ReplyLog>.fromOpaque(userdata).takeUnretainedValue().record(line)
            return length
        }

        let result = curl_easy_perform(handle)
        var code = 0
        countersign_curl_get_long(handle, CURLINFO_RESPONSE_CODE, &code)
        if result == CURLE_OK {
            return .accepted(replies.last ?? "\(code)")
        }
        let detail = String(cString: errorBuffer)
        var reason = detail.isEmpty ? String(cString: curl_easy_strerror(result)) : detail
        if let reply = replies.last, code >= 400 { reason += " (server: \(reply))" }
        // A refused login (535) is a 5xx like any other: not retried
        // (email-reset.md); the audit trail and the log say which.
        switch code {
        case 400..<500: return .temporaryFailure(reason)
        case 500..<600: return .permanentFailure(reason)
        default: return .temporaryFailure(reason)  // no reply: connection, TLS or time-out
        }
    }

    /// RFC 5322 date of now.
    static func date() -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss Z"
        return formatter.string(from: Date())
    }

    /// The server's replies, as libcurl hands them to the header callback.
    final class ReplyLog {
        private(set) var last: String?

        func record(_ line: String) {
            let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
            // 221 answers QUIT, after the reply that matters (the one to the mail's data).
            if !trimmed.isEmpty, !trimmed.hasPrefix("221") { last = String(trimmed.prefix(300)) }
        }
    }
}
