import CountersignCore
import Foundation
import NIOCore
import PropertyBased
import Testing

@testable import CountersignPush

/// The send body is written field by field when no string holds a control character;
/// it must be the bytes the encoder writes, whatever the integration's words.
@Suite struct FCMBodyWriterTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000.25)

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    static func jobs(title: String, body: String, context: String, requestID: String) -> [PushJob] {
        let expiresAt = now.addingTimeInterval(60)
        let requester = RequesterInfo(ip: "203.0.113.7", userAgent: body)
        let prompt = ApprovalPrompt(
            integrationID: "int_1", integrationName: title, userEmail: "ana@example.com", title: title, body: body,
            context: context.isEmpty ? [:] : ["ip": context, "where": title])
        return [
            .prompt(requestID: requestID, userID: "u1", action: .passwordReset, expiresAt: expiresAt, requester: requester),
            .prompt(
                requestID: requestID, userID: "u1", action: ApprovalAction(rawValue: "wire.transfer")!, expiresAt: expiresAt,
                requester: requester, prompt: prompt),
            .resolved(requestID: requestID, userID: "u1", status: .denied),
        ]
    }

    /// What ``FCMMessageBuilder/encode(_:validateOnly:)`` must return: the encoder's bytes within FCM's limit.
    static func reference(_ message: FCMMessage, validateOnly: Bool) throws -> Data? {
        let data = try encoder.encode(FCMSendBody(message: message, validateOnly: validateOnly ? true : nil))
        return data.count <= FCMMessageBuilder.maximumBytes ? data : nil
    }

    @Test func randomWordsAreWrittenAsTheEncoderWritesThem() async throws {
        // Printable ASCII (with quotes and backslashes now and then), and text
        // from the control characters up to CJK.
        let ascii = Gen.character(in: " "..."~").string(of: 0...40)
        let wide = Gen.character(in: "\u{0}"..."\u{9FFF}").string(of: 0...40)
        await propertyCheck(count: 300, input: ascii, wide, ascii, Gen.bool) { plain, anything, token, validateOnly in
            for (title, body) in [(plain, anything), (anything, plain), (plain, plain)] {
                for job in Self.jobs(title: title, body: body, context: anything, requestID: token.isEmpty ? "r" : token) {
                    let message = try #require(FCMMessageBuilder.message(for: job, token: token, now: Self.now))
                    let written = try FCMMessageBuilder.encode(message, validateOnly: validateOnly)
                    #expect(written == (try Self.reference(message, validateOnly: validateOnly)))
                    let body = FCMSendBody(message: message, validateOnly: validateOnly ? true : nil)
                    if let plainJSON = body.plainJSON {
                        #expect(Data(plainJSON) == (try Self.encoder.encode(body)))
                    }
                }
            }
        }
    }

    @Test func everyKindOfMessageTakesTheDirectPathAndAControlCharacterTakesTheEncoder() throws {
        // A context is JSON in a string: its quotes are escaped on the direct path.
        let plain = Self.jobs(title: #"Sign in to "Acme""#, body: #"Firefox on Linux, Zürich \ 東京"#, context: "203.0.113.7", requestID: "AbCdEf")
        for job in plain {
            let message = try #require(FCMMessageBuilder.message(for: job, token: "device-token:APA91b", now: Self.now))
            let written = try #require(FCMSendBody(message: message, validateOnly: nil).plainJSON)
            #expect(Data(written) == (try Self.encoder.encode(FCMSendBody(message: message, validateOnly: nil))))
        }
        for awkward in ["line\nbreak", "tab\there", "bell\u{7}", "del\u{7F}", "nul\u{0}"] {
            let job = Self.jobs(title: awkward, body: "b", context: "", requestID: "AbCdEf")[1]
            let message = try #require(FCMMessageBuilder.message(for: job, token: "t", now: Self.now))
            #expect(FCMSendBody(message: message, validateOnly: nil).plainJSON == nil, "\(awkward.debugDescription)")
            let encoded = try #require(try FCMMessageBuilder.encode(message))
            let decoded = try JSONSerialization.jsonObject(with: encoded) as? [String: Any]
            #expect((decoded?["message"] as? [String: Any]).flatMap { ($0["notification"] as? [String: String])?["title"] } == awkward)
        }
    }

    /// Each device's body from the job's shared bytes is the body written for that device alone: across
    /// jobs, tokens (quotes and control characters included), the clock's seconds, and contexts long enough
    /// that a long token pushes the message past FCM's limit.
    @Test func eachDevicesBodyFromItsJobsSharedBytesIsItsOwnMessage() async throws {
        let ascii = Gen.character(in: " "..."~").string(of: 0...40)
        let wide = Gen.character(in: "\u{0}"..."\u{9FFF}").string(of: 0...40)
        let tokens = Gen.character(in: " "..."~").string(of: 0...300)
        let offsets = Gen.int(in: 0...3_000)
        let bodies = FCMJobBodies()
        await propertyCheck(count: 300, input: ascii, wide, tokens, offsets) { plain, anything, token, offset in
            // Up to 60 s into a 60 s prompt, so a prompt's seconds left and a notice's second both change.
            let now = Self.now.addingTimeInterval(Double(offset) / 50)
            let long = String(repeating: plain.isEmpty ? "x" : plain, count: 1_100 / max(1, plain.count))
            var jobs = Self.jobs(title: plain, body: anything, context: anything, requestID: "AbCdEf")
            jobs += Self.jobs(title: plain, body: long, context: long, requestID: "AbCdEf")
            // Each job's devices at one moment, then at a moment 0.7 s on: the same or the next second.
            for job in jobs {
                for (device, now) in [token, "device-" + token, token + "\u{1}", #"a"b\c"#].flatMap({ [($0, now), ($0, now + 0.7)] }) {
                    let message = FCMMessageBuilder.message(for: job, token: device, now: now)
                    let encoded = try message.flatMap { try FCMMessageBuilder.encode($0) }
                    do {
                        let body = try bodies.body(for: job, token: device, now: now)
                        #expect(encoded != nil && Data(body.readableBytesView) == encoded)
                    } catch let refusal as PushRefusal {
                        #expect(refusal.kind == .tooLate && message == nil)
                    } catch let failure as FCMFailure {
                        #expect(failure.httpStatus == 0 && message != nil && encoded == nil)
                    }
                }
            }
        }
    }
}
