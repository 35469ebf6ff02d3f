import ArgumentParser
import CountersignCore
import CountersignDeviceKeys
import CountersignRuntime
import CountersignStore
import Foundation
import Logging

struct AuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Print the audit trail, newest last."
    )

    @Option(help: ArgumentHelp("Only events this recent: 30m, 1h or 7d, say.", valueName: "duration")) var since: String?
    @Option(
        help: ArgumentHelp(
            "Only events of this user (or attempts with this email); an erased user's too, by their pseudonym (with the secret key).",
            valueName: "email"))
    var email: String?
    @Option(help: ArgumentHelp("Only events of this kind (\(AuditKind.allCases.map(\.rawValue).joined(separator: ", "))).", valueName: "kind"))
    var kind: String?
    @Option(help: ArgumentHelp("At most this many events (the newest).", valueName: "count")) var limit: Int = 1000
    @Flag(help: "One JSON object per line.") var json = false
    // Unconditional: one request id in 64 begins with `-`, and is still the
    // value (``validate()`` refuses an option taken for one).
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Only the events of this request: its id (the approvalId or requestId a requester holds) or its 12-character reference, as the trail and webhook list show it.",
            valueName: "id-or-reference")
    )
    var request: String?
    @Flag(help: "With --request: print each signed answer (JWS) and whether it still verifies with the key that made it.")
    var proof = false
    @OptionGroup var database: DatabaseOptions
    @Option(\.secretKeyFile) var secretKeyFile: String?

    /// `--request` takes the next word whatever it is: a word beginning with
    /// `-` that is not a request id (22 characters) is an option given where
    /// the id was missing (`--request --proof`), not a request to look up.
    func validate() throws {
        if let request, request.hasPrefix("-"), !(request.utf8.count == 22 && SecureToken.isWellFormed(request)) {
            throw ValidationError("--request needs a request id or reference, not \(request)")
        }
        if let kind, AuditKind(rawValue: kind) == nil { throw ValidationError("unknown kind \(kind)") }
        if let since, Self.duration(since) == nil { throw ValidationError("--since takes a duration such as 30m, 1h or 7d") }
        guard limit > 0 else { throw ValidationError("--limit must be positive") }
        if proof && request == nil { throw ValidationError("--proof goes with --request REF") }
    }

    func run() async throws {
        let kindFilter = kind.flatMap(AuditKind.init(rawValue:))
        let sinceDate = since.flatMap(Self.duration).map { Date().addingTimeInterval(-$0) }
        let store = try await database.open()
        if let given = request {
            let request = Self.reference(given)
            let events = try await store.auditEvents(requestRef: request)
            if proof { return try await printProofs(events, request: request) }
            for event in events { print(json ? Self.jsonLine(event) : Self.textLine(event)) }
            if events.isEmpty { Console.current.writeError("no audit events for request \(request)\n") }
            return
        }
        var events = try await store.auditEvents(since: sinceDate, email: email, kind: kindFilter, limit: limit)
        // An erased user's events carry a keyed pseudonym instead of the email: the same key finds them.
        if let email {
            do {
                let keys = try database.loader(self).secretKeys(logger: Logger(label: "countersign"))
                let erased = try await store.auditEvents(
                    since: sinceDate, email: keys.auditPseudonym(email: email), kind: kindFilter, limit: limit)
                events = Array((events + erased).sorted { $0.at < $1.at }.suffix(limit))
            } catch {
                // Said, not hidden: without the key an erased user's events cannot be told apart.
                Console.current.writeError("without the secret key an erased user's events are not searched: \(error)\n")
            }
        }
        for event in events {
            print(json ? Self.jsonLine(event) : Self.textLine(event))
        }
        if events.isEmpty && !json {
            Console.current.writeError("no audit events match\n")
        }
    }

    /// The reference the trail files a request under: a 12-character reference
    /// as given, or the reference of a request id (never printed: the id is the requester's credential).
    static func reference(_ given: String) -> String {
        let text = given.trimmingCharacters(in: .whitespaces)
        let isReference = text.utf8.count == 12 && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
        return isReference ? text : ApprovalRequest.logReference(of: text)
    }

    /// Each signed answer of the request, re-verified: the signature with the
    /// key kept beside it, the claims against the event. Exit 1 if any fails.
    func printProofs(_ events: [AuditEvent], request: String) async throws {
        let signed = events.filter { $0.proof != nil }
        guard !signed.isEmpty else {
            Console.current.writeError("no signed answer for request \(request)\n")
            throw ExitCode.failure
        }
        var allValid = true
        for event in signed {
            guard let jws = event.proof else { continue }
            print(Self.textLine(event))
            print("  jws: \(jws)")
            guard let stored = event.proofKey, let key = try? DeviceKey(stored: stored) else {
                print("  ✗ no usable key kept with this answer")
                allValid = false
                continue
            }
            print("  key: \(key.json) (thumbprint \(key.thumbprint))")
            guard let claims = await AnswerSignature.signedClaims(jws, key: key) else {
                print("  ✗ the signature does not verify with this key")
                allValid = false
                continue
            }
            let matches =
                ApprovalRequest.logReference(of: claims.requestId) == request && claims.deviceId == event.deviceID
                && (event.kind == .approved || event.kind == .numberMismatch ? claims.decision == "approve" : claims.decision == "deny")
            let signedAt = Date(timeIntervalSince1970: TimeInterval(claims.iat)).formatted(.iso8601)
            print(
                "  \(matches ? "✓" : "✗") ES256 signature valid; \(claims.decision) by device \(claims.deviceId), signed at \(signedAt)"
                    + (matches ? "" : "; the claims do not match this event"))
            allValid = allValid && matches
        }
        if !allValid { throw ExitCode.failure }
    }

    static func duration(_ text: String) -> TimeInterval? {
        guard let unit = text.last, let number = Double(text.dropLast()), number >= 0 else { return nil }
        switch unit {
        case "s": return number
        case "m": return number * 60
        case "h": return number * 3600
        case "d": return number * 86400
        default: return nil
        }
    }

    static func fields(_ event: AuditEvent) -> [(String, String?)] {
        [
            ("time", event.at.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))),
            ("kind", event.kind.rawValue), ("user", event.userID), ("email", event.email), ("device", event.deviceID),
            ("request", event.requestRef), ("ip", event.ip), ("userAgent", event.userAgent), ("detail", event.detail),
        ]
    }

    static func textLine(_ event: AuditEvent) -> String {
        fields(event).compactMap { key, value in
            guard let value else { return nil }
            // Every value that came from outside stays one field of one line (LogText).
            return key == "time" || key == "kind" ? value : "\(key)=\(LogText.field(value))"
        }.joined(separator: " ")
    }

    static func jsonLine(_ event: AuditEvent) -> String {
        let object = Dictionary(uniqueKeysWithValues: fields(event).compactMap { key, value in value.map { (key, $0) } })
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}
