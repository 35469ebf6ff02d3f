import CountersignCore
import CountersignRuntime
import Crypto
import Foundation
import JWTKit
import NIOHTTP1
import TestSupport
import Testing

@testable import CountersignDeviceKeys
@testable import DaemonTestSupport

/// Answers bound to a P-256 key that never leaves the phone.
@Suite struct DeviceKeyTests {
    /// A phone with a key of its own, signed in.
    struct KeyedPhone {
        let key: ES256PrivateKey
        let apiKey: String
        let deviceID: String
        let keyBound: Bool

        var publicKey: DeviceKey { get throws { try DeviceKey(signingKey: key) } }

        func payload(
            _ requestID: String, decision: String = "approve", code: String?, iat: Date = Date(), deviceID: String? = nil
        )
            -> AnswerSignature.Payload
        {
            .init(
                requestId: requestID, decision: decision, numberCode: code, iat: Int(iat.timeIntervalSince1970), deviceId: deviceID ?? self.deviceID)
        }
    }

    static func signIn(_ daemon: TestDaemon, key: ES256PrivateKey = ES256PrivateKey(), device: String = "Phone") async throws -> KeyedPhone {
        let answer = try await daemon.call(
            .POST, "/api/mobile/auth/login",
            json: [
                "email": Fixture.email, "password": Fixture.password, "deviceName": device, "platform": "iOS",
                "publicKey": try DeviceKey(signingKey: key).jwk,
            ])
        let body = answer.json
        let deviceOut = try #require(body["device"] as? [String: any Sendable], "\(answer.text)")
        return KeyedPhone(
            key: key, apiKey: try #require(answer["apiKey"]), deviceID: try #require(deviceOut["id"] as? String),
            keyBound: deviceOut["keyBound"] as? Bool ?? false)
    }

    static func respond(
        _ daemon: TestDaemon, _ id: String, apiKey: String, code: String?, decision: String = "approve", signature: String?,
        reportFraud: Bool = false
    )
        async throws -> TestDaemon.Answer
    {
        var body: [String: any Sendable] = ["decision": decision]
        if reportFraud { body["reportFraud"] = true }
        if let code { body["numberCode"] = code }
        if let signature { body["signature"] = signature }
        return try await daemon.call(.POST, "/api/mobile/approvals/\(id)/respond", json: body, apiKey: apiKey)
    }

    static func base64url(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    @Test func aKeyBoundDeviceApprovesWithASignatureKeptInTheAuditTrail() async throws {
        try await withTestDaemon { daemon in
            // setup
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let phone = try await Self.signIn(daemon)
            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)

            // act
            let signature = try await AnswerSignature.sign(phone.payload(id, code: code), with: phone.key)
            let answer = try await Self.respond(daemon, id, apiKey: phone.apiKey, code: code, signature: signature)

            // check
            #expect(phone.keyBound)
            #expect(answer.status == 200)
            #expect(answer["status"] == "approved")
            let keyless = try await daemon.login(Fixture.email, password: Fixture.password, device: "Old phone")
            _ = keyless
            var approved: [AuditEvent] = []
            for _ in 0..<100 where approved.isEmpty {
                approved = try await daemon.server.store.auditEvents(since: nil, email: nil, kind: .approved, limit: 10)
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(approved.first?.proof == signature)
            #expect(approved.first?.proofKey == (try phone.publicKey).json)
        }
    }

    @Test func everyForgedOrMismatchedSignatureIsRefusedAndTheRequestStaysPending() async throws {
        try await withTestDaemon(configure: { $0.rateLimits[.respondPerDevice] = RateLimit(count: 100, window: 60) }) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let phone = try await Self.signIn(daemon)
            let (earlier, earlierCode) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            // A valid signature for the earlier request, replayed on the next one.
            let replayed = try await AnswerSignature.sign(phone.payload(earlier, code: earlierCode), with: phone.key)
            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            let good = phone.payload(id, code: code)
            let other = ES256PrivateKey()
            let wrongCode = code == "00" ? "01" : "00"

            // alg none: the payload with no signature at all.
            let header = Self.base64url(Data(#"{"alg":"none","typ":"countersign-answer+jwt"}"#.utf8))
            let claims = Self.base64url(try JSONEncoder().encode(good))
            let none = "\(header).\(claims)."
            // HS256 keyed with the device's public key (the classic confusion).
            let hmac = JWTKeyCollection()
            await hmac.add(hmac: HMACKey(from: try phone.publicKey.json), digestAlgorithm: .sha256)
            let hs256 = try await hmac.sign(good, header: ["typ": .string(AnswerSignature.type)])
            // Signed by another key that the header offers as its own.
            let attacker = JWTKeyCollection()
            await attacker.add(ecdsa: other)
            let otherJWK = try DeviceKey(signingKey: other).jwk.mapValues { JWTHeaderField.string($0) }
            let keyInHeader = try await attacker.sign(good, header: ["typ": .string(AnswerSignature.type), "jwk": .object(otherJWK)])

            let forged: [(String, String?, String?, String)] = [
                ("no signature", nil, code, "approve"),
                ("another key", try await AnswerSignature.sign(good, with: other), code, "approve"),
                ("alg none", none, code, "approve"),
                ("HS256 with the public key", hs256, code, "approve"),
                ("a key in the header", keyInHeader, code, "approve"),
                ("another request", try await AnswerSignature.sign(phone.payload(earlier, code: code), with: phone.key), code, "approve"),
                (
                    "another decision", try await AnswerSignature.sign(phone.payload(id, decision: "deny", code: code), with: phone.key), code,
                    "approve"
                ),
                ("a denial signed as an approval", try await AnswerSignature.sign(good, with: phone.key), code, "deny"),
                ("another number code", try await AnswerSignature.sign(phone.payload(id, code: wrongCode), with: phone.key), code, "approve"),
                (
                    "another device", try await AnswerSignature.sign(phone.payload(id, code: code, deviceID: "someone-else"), with: phone.key), code,
                    "approve"
                ),
                (
                    "iat 3 minutes old",
                    try await AnswerSignature.sign(phone.payload(id, code: code, iat: Date().addingTimeInterval(-180)), with: phone.key), code,
                    "approve"
                ),
                (
                    "iat 3 minutes ahead",
                    try await AnswerSignature.sign(phone.payload(id, code: code, iat: Date().addingTimeInterval(180)), with: phone.key), code,
                    "approve"
                ),
                ("a replay from another request", replayed, code, "approve"),
                ("garbage", "not.a.jws", code, "approve"),
            ]
            for (name, signature, numberCode, decision) in forged {
                let answer = try await Self.respond(daemon, id, apiKey: phone.apiKey, code: numberCode, decision: decision, signature: signature)
                #expect(answer.status == 401, "\(name)")
                #expect(answer["error"] == "invalid_signature", "\(name)")
            }
            #expect(try await daemon.status(id)["status"] == "pending", "no forged answer changed the request, not even to deny it")

            let signed = try await AnswerSignature.sign(good, with: phone.key)
            #expect(try await Self.respond(daemon, id, apiKey: phone.apiKey, code: code, signature: signed).status == 200)
            let refused = try await daemon.waitForAudit(.signatureRefused) { $0.count >= forged.count }
            #expect(refused.count == forged.count)
        }
    }

    /// A JWS put together by hand, so that its header can say anything, signed with `key`,
    /// with its `s` high or low as asked (ECDSA is randomised: about every other signature is each).
    static func handSigned(header: String, payload: AnswerSignature.Payload, key: P256.Signing.PrivateKey, highS: Bool? = nil) throws -> String {
        let input = base64url(Data(header.utf8)) + "." + base64url(try JSONEncoder().encode(payload))
        while true {
            let signature = try key.signature(for: Data(input.utf8)).rawRepresentation
            if highS == nil || isHigh(Array(signature.suffix(32))) == highS { return input + "." + base64url(signature) }
        }
    }

    /// Half the order of P-256, big-endian: an `s` above it is "high".
    static let halfOrder: [UInt8] = [
        0x7F, 0xFF, 0xFF, 0xFF, 0x80, 0x00, 0x00, 0x00, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xDE, 0x73, 0x7D, 0x56, 0xD3, 0x8B, 0xCF, 0x42, 0x79, 0xDC, 0xE5, 0x61, 0x7E, 0x31, 0x92, 0xA8,
    ]

    static func isHigh(_ s: [UInt8]) -> Bool {
        for (byte, limit) in zip(s, halfOrder) where byte != limit { return byte > limit }
        return false
    }

    /// trust.md: a key-bound device's fraud report is part of what it signs:
    /// a report the signature does not cover, and a signature covering a
    /// report not sent, are both refused, and change nothing.
    @Test func aFraudReportMustBeSigned() async throws {
        try await withTestDaemon(configure: { $0.rateLimits[.respondPerDevice] = RateLimit(count: 100, window: 60) }) { daemon in
            let user = try await daemon.createUser(Fixture.email, password: Fixture.password)
            let phone = try await Self.signIn(daemon, key: ES256PrivateKey())
            let (id, _) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            let plain = phone.payload(id, decision: "deny", code: nil)
            var fraud = plain
            fraud.fraud = true
            let unsignedReport = try await Self.respond(
                daemon, id, apiKey: phone.apiKey, code: nil, decision: "deny", signature: try await AnswerSignature.sign(plain, with: phone.key),
                reportFraud: true)
            #expect(unsignedReport.status == 401)
            #expect(unsignedReport["error"] == "invalid_signature")
            let unsentReport = try await Self.respond(
                daemon, id, apiKey: phone.apiKey, code: nil, decision: "deny", signature: try await AnswerSignature.sign(fraud, with: phone.key))
            #expect(unsentReport.status == 401)
            #expect(try await daemon.status(id)["status"] == "pending")
            #expect(try await daemon.server.store.user(id: user.id)?.silencedUntil == nil)
            // Signed and sent: denied, and the user's prompts are silenced.
            let reported = try await Self.respond(
                daemon, id, apiKey: phone.apiKey, code: nil, decision: "deny", signature: try await AnswerSignature.sign(fraud, with: phone.key),
                reportFraud: true)
            #expect(reported.status == 200)
            #expect(reported["status"] == "denied")
            #expect(try await daemon.server.store.user(id: user.id)?.silencedUntil != nil)
        }
    }

    /// trust.md: a valid signature with a high `s` is accepted as a low one is
    /// (phones' keystores do not normalise `s`); one whose last character
    /// carries padding bits, or that is not a string, is refused (401); a
    /// proof of possession is used once by what it means, so a second
    /// signature over the same claims, in either form, is refused.
    @Test func aSignatureIsTakenInEitherFormAndAProofOnceByItsMeaning() async throws {
        try await withTestDaemon(configure: { $0.rateLimits[.respondPerDevice] = RateLimit(count: 100, window: 60) }) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let p256 = P256.Signing.PrivateKey()
            let phone = try await Self.signIn(daemon, key: ES256PrivateKey(backing: p256))
            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            let header = #"{"alg":"ES256","typ":"countersign-answer+jwt"}"#
            let payload = phone.payload(id, code: code)
            let low = try Self.handSigned(header: header, payload: payload, key: p256, highS: false)
            // 64 bytes are 86 characters; the last carries 2 bits and 4 that must be zero.
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
            let lastCharacter = try #require(low.last)
            let last = try #require(alphabet.firstIndex(of: lastCharacter))
            let padded = String(low.dropLast()) + String(alphabet[last ^ 1])
            #expect(DeviceKey.decode(String(padded.split(separator: ".")[2])) == DeviceKey.decode(String(low.split(separator: ".")[2])))
            #expect(try await Self.respond(daemon, id, apiKey: phone.apiKey, code: code, signature: padded).status == 401)
            for empty in ["", "a.b.c", "not a jws"] {
                let answer = try await Self.respond(daemon, id, apiKey: phone.apiKey, code: code, signature: empty)
                #expect(answer.status == 401, "\(empty)")
                #expect(answer["error"] == "invalid_signature")
            }
            // Not a string at all: the same failed signature, not a malformed body.
            for notText in [123, NSNull(), ["a"], ["alg": "ES256"]] as [any Sendable] {
                let answer = try await daemon.call(
                    .POST, "/api/mobile/approvals/\(id)/respond", json: ["decision": "approve", "numberCode": code, "signature": notText],
                    apiKey: phone.apiKey)
                #expect(answer.status == 401, "\(notText)")
                #expect(answer["error"] == "invalid_signature")
            }
            #expect(try await daemon.status(id)["status"] == "pending")
            // A high `s` is as valid as a low one: the answer is taken.
            let high = try Self.handSigned(header: header, payload: payload, key: p256, highS: true)
            #expect(try await Self.respond(daemon, id, apiKey: phone.apiKey, code: code, signature: high).status == 200)
            #expect(try await daemon.status(id)["status"] == "approved")

            // A new key's proof, then another text of the same claims (the same second): refused.
            let next = ES256PrivateKey()
            let at = Date()
            let current = phone.key
            func put(_ proof: String, previous: String) async throws -> Int {
                try await daemon.call(
                    .PUT, "/api/mobile/device/public-key",
                    json: ["publicKey": try DeviceKey(signingKey: next).jwk, "proof": proof, "previousProof": previous], apiKey: phone.apiKey
                ).status
            }
            let proof = try await PossessionProof.sign(deviceID: phone.deviceID, at: at, with: next)
            let previous = try await PossessionProof.sign(deviceID: phone.deviceID, at: at, with: current)
            let sameMeaning = try await PossessionProof.sign(deviceID: phone.deviceID, at: at, with: next)
            #expect(sameMeaning != proof)
            #expect(try await put(proof, previous: previous) == 200)
            // Back to the first key would need the new key's proof as `previous`: its one use is gone.
            let again = try await daemon.call(
                .PUT, "/api/mobile/device/public-key",
                json: [
                    "publicKey": try DeviceKey(signingKey: current).jwk,
                    "proof": try await PossessionProof.sign(deviceID: phone.deviceID, at: at.addingTimeInterval(1), with: current),
                    "previousProof": sameMeaning,
                ], apiKey: phone.apiKey)
            #expect(again.status == 401)
        }
    }

    @Test func aGenuineSignatureUnderAHeaderThatWidensTheCheckIsRefused() async throws {
        try await withTestDaemon(configure: { $0.rateLimits[.respondPerDevice] = RateLimit(count: 100, window: 60) }) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let p256 = P256.Signing.PrivateKey()
            let phone = try await Self.signIn(daemon, key: ES256PrivateKey(backing: p256))
            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            let payload = phone.payload(id, code: code)
            let jwk = try phone.publicKey
            let headers = [
                #"{"alg":"HS256","typ":"countersign-answer+jwt"}"#,
                #"{"alg":"ES256"}"#,
                #"{"alg":"ES256","typ":"JWT"}"#,
                #"{"alg":"ES256","typ":"countersign-answer+jwt","jwk":{"kty":"EC","crv":"P-256","x":"\#(jwk.x)","y":"\#(jwk.y)"}}"#,
                #"{"alg":"ES256","typ":"countersign-answer+jwt","crit":["exp"],"exp":1}"#,
                #"{"alg":"ES256","typ":"countersign-answer+jwt","jku":"https://attacker.example/keys"}"#,
            ]
            for header in headers {
                let answer = try await Self.respond(
                    daemon, id, apiKey: phone.apiKey, code: code, signature: try Self.handSigned(header: header, payload: payload, key: p256))
                #expect(answer.status == 401, "\(header)")
                #expect(answer["error"] == "invalid_signature", "\(header)")
            }
            #expect(try await daemon.status(id)["status"] == "pending")
            // The same hand-made signature under the contract's header is accepted: the refusals were the headers'.
            let good = try Self.handSigned(header: #"{"alg":"ES256","typ":"countersign-answer+jwt"}"#, payload: payload, key: p256)
            #expect(try await Self.respond(daemon, id, apiKey: phone.apiKey, code: code, signature: good).status == 200)
        }
    }

    /// trust.md: a signature nobody can check is a failed check. A device
    /// without a key that sends one is refused as a forged answer is, and the
    /// request stays pending; without one it answers as before.
    @Test func aKeylessDeviceThatSendsASignatureIsRefused() async throws {
        try await withTestDaemon { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let login = try await daemon.call(
                .POST, "/api/mobile/auth/login",
                json: ["email": Fixture.email, "password": Fixture.password, "deviceName": "Old app", "platform": "iOS"])
            let keyless = try #require(login["apiKey"])
            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            for signature in ["garbage", "", "a.b.c"] {
                let refused = try await Self.respond(daemon, id, apiKey: keyless, code: code, signature: signature)
                #expect(refused.status == 401, "\(signature)")
                #expect(refused["error"] == "invalid_signature")
            }
            #expect(try await daemon.status(id)["status"] == "pending")
            #expect(try await daemon.respond(id, apiKey: keyless, code: code).status == 200)
        }
    }

    @Test func theRequiredPolicyRefusesAnswersFromKeylessDevices() async throws {
        try await withTestDaemon(configure: { $0.deviceKeys = .required }) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let login = try await daemon.call(
                .POST, "/api/mobile/auth/login",
                json: ["email": Fixture.email, "password": Fixture.password, "deviceName": "Old app", "platform": "iOS"])
            #expect((login.json["device"] as? [String: any Sendable])?["keyBound"] as? Bool == false)
            let keyless = try #require(login["apiKey"])
            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            #expect(try await daemon.call(.GET, "/api/mobile/approvals/pending", apiKey: keyless).status == 200)
            let refused = try await daemon.respond(id, apiKey: keyless, code: code)
            #expect(refused.status == 403)
            #expect(refused["error"] == "key_required")
            #expect(try await daemon.status(id)["status"] == "pending")

            let phone = try await Self.signIn(daemon)
            let signature = try await AnswerSignature.sign(phone.payload(id, code: code), with: phone.key)
            #expect(try await Self.respond(daemon, id, apiKey: phone.apiKey, code: code, signature: signature).status == 200)
        }
    }

    @Test func withKeysOffAKeyIsIgnoredAndAnswersNeedNoSignature() async throws {
        try await withTestDaemon(configure: { $0.deviceKeys = .off }) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let phone = try await Self.signIn(daemon)
            #expect(!phone.keyBound)
            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            #expect(try await daemon.respond(id, apiKey: phone.apiKey, code: code).status == 200)
            // Ignored, not checked: a key this server would refuse does not stop the login.
            let valid = try DeviceKey(signingKey: ES256PrivateKey())
            let other = try await daemon.call(
                .POST, "/api/mobile/auth/login",
                json: [
                    "email": Fixture.email, "password": Fixture.password, "deviceName": "Tablet", "platform": "iOS",
                    "publicKey": ["kty": "EC", "crv": "P-384", "x": valid.x, "y": valid.y],
                ])
            #expect(other.status == 200, "\(other.text)")
            #expect((other.json["device"] as? [String: any Sendable])?["keyBound"] as? Bool == false)
        }
    }

    @Test func aKeyAsWebCryptoExportsItWithNonStringMembersIsTaken() async throws {
        try await withTestDaemon { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let key = ES256PrivateKey()
            let jwk = try DeviceKey(signingKey: key)
            // crypto.subtle.exportKey("jwk", publicKey) adds "ext" and "key_ops".
            let exported: [String: any Sendable] = ["kty": "EC", "crv": "P-256", "x": jwk.x, "y": jwk.y, "ext": true, "key_ops": ["verify"]]
            let answer = try await daemon.call(
                .POST, "/api/mobile/auth/login",
                json: ["email": Fixture.email, "password": Fixture.password, "deviceName": "Phone", "platform": "iOS", "publicKey": exported])
            #expect(answer.status == 200, "\(answer.text)")
            #expect((answer.json["device"] as? [String: any Sendable])?["keyBound"] as? Bool == true)
            // A private key (with "d") is still refused, whatever else it holds.
            var secret = exported
            secret["d"] = jwk.x
            let refused = try await daemon.call(
                .POST, "/api/mobile/auth/login",
                json: ["email": Fixture.email, "password": Fixture.password, "deviceName": "Phone", "platform": "iOS", "publicKey": secret])
            #expect(refused.status == 400)
        }
    }

    @Test func settingOrReplacingAKeyNeedsProofOfPossession() async throws {
        try await withTestDaemon(configure: {
            $0.rateLimits[.respondPerDevice] = RateLimit(count: 100, window: 60)
            $0.rateLimits[.deviceKeyChangesPerDevice] = RateLimit(count: 100, window: 3600)
        }) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let (apiKey, deviceID) = try await daemon.login(Fixture.email, password: Fixture.password)
            func put(_ key: ES256PrivateKey, proof: String, previousProof: String? = nil) async throws -> TestDaemon.Answer {
                var body: [String: any Sendable] = ["publicKey": try DeviceKey(signingKey: key).jwk, "proof": proof]
                if let previousProof { body["previousProof"] = previousProof }
                return try await daemon.call(.PUT, "/api/mobile/device/public-key", json: body, apiKey: apiKey)
            }
            let first = ES256PrivateKey()
            let second = ES256PrivateKey()

            // A keyless device sets its first key with a proof by that key.
            #expect(try await put(first, proof: PossessionProof.sign(deviceID: "someone-else", at: Date(), with: first)).status == 401)
            #expect(
                try await put(first, proof: PossessionProof.sign(deviceID: deviceID, at: Date().addingTimeInterval(-360), with: first)).status == 401)
            #expect(
                try await put(first, proof: PossessionProof.sign(deviceID: deviceID, at: Date().addingTimeInterval(360), with: first)).status == 401)
            #expect(try await put(first, proof: PossessionProof.sign(deviceID: deviceID, at: Date(), with: second)).status == 401)
            let firstProof = try await PossessionProof.sign(deviceID: deviceID, at: Date(), with: first)
            let set = try await put(first, proof: firstProof)
            #expect(set.status == 200)
            #expect(set.json["keyBound"] as? Bool == true)
            // A proof works once.
            #expect(try await put(first, proof: firstProof).status == 401)

            // Replacing it needs the old key's proof as well.
            let newProof = try await PossessionProof.sign(deviceID: deviceID, at: Date(), with: second)
            let withoutPrevious = try await put(second, proof: newProof)
            #expect(withoutPrevious.status == 400)
            #expect(withoutPrevious["message"]?.contains("previousProof") == true)
            #expect(try await put(second, proof: newProof, previousProof: newProof).status == 401)
            // A signed answer of the current key is not a proof of possession.
            let (earlier, earlierCode) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            let answerByFirst = try await AnswerSignature.sign(
                .init(requestId: earlier, decision: "approve", numberCode: earlierCode, iat: Int(Date().timeIntervalSince1970), deviceId: deviceID),
                with: first)
            #expect(try await put(second, proof: newProof, previousProof: answerByFirst).status == 401)
            // A second later than `firstProof`: a proof is one use of (device, key, iat).
            let previous = try await PossessionProof.sign(deviceID: deviceID, at: Date().addingTimeInterval(1), with: first)
            #expect(try await put(second, proof: newProof, previousProof: previous).status == 200)

            // From now on only the new key's signatures count.
            let (id, code) = try await daemon.initiate(Fixture.email, newPassword: Fixture.newPassword)
            let payload = AnswerSignature.Payload(
                requestId: id, decision: "approve", numberCode: code, iat: Int(Date().timeIntervalSince1970), deviceId: deviceID)
            #expect(
                try await Self.respond(daemon, id, apiKey: apiKey, code: code, signature: AnswerSignature.sign(payload, with: first)).status == 401)
            #expect(
                try await Self.respond(daemon, id, apiKey: apiKey, code: code, signature: AnswerSignature.sign(payload, with: second)).status == 200)
        }
    }

    @Test func aMalformedOrOffCurveKeyIsRefusedNamingTheField() async throws {
        try await withTestDaemon { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            let valid = try DeviceKey(signingKey: ES256PrivateKey())
            let thirtyOne = Self.base64url(Data(repeating: 7, count: 31))
            let offCurve = Self.base64url(Data(repeating: 0, count: 31) + [1])
            let bad: [[String: String]] = [
                ["kty": "EC", "crv": "P-384", "x": valid.x, "y": valid.y],
                ["kty": "RSA", "n": "AQAB", "e": "AQAB"],
                ["kty": "EC", "crv": "P-256", "x": "not base64url!", "y": valid.y],
                ["kty": "EC", "crv": "P-256", "x": thirtyOne, "y": valid.y],
                ["kty": "EC", "crv": "P-256", "x": offCurve, "y": offCurve],
                ["kty": "EC", "crv": "P-256", "x": valid.x],
            ]
            for jwk in bad {
                let answer = try await daemon.call(
                    .POST, "/api/mobile/auth/login",
                    json: ["email": Fixture.email, "password": Fixture.password, "deviceName": "Phone", "platform": "iOS", "publicKey": jwk])
                #expect(answer.status == 400, "\(jwk)")
                #expect(answer["message"]?.contains("`publicKey`") == true, "\(jwk)")
            }
            let (apiKey, _) = try await daemon.login(Fixture.email, password: Fixture.password)
            let put = try await daemon.call(
                .PUT, "/api/mobile/device/public-key",
                json: ["publicKey": ["kty": "EC", "crv": "P-256", "x": offCurve, "y": offCurve], "proof": "x.y.z"], apiKey: apiKey)
            #expect(put.status == 400)
            #expect(put["message"] == "The field `publicKey` is not a point on the P-256 curve.")
        }
    }
}
