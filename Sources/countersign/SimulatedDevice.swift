import CountersignCore
import CountersignDeviceKeys
import Foundation
import JWTKit

/// The reference device of the device-keys contract: signs in with a fresh
/// P-256 key and answers with ES256-signed answers, as a phone app would.
/// Used by `countersign device simulate` and by the demo.
struct SimulatedDevice {
    /// One HTTP call: method, path, JSON body, API key → status and JSON body.
    typealias Transport = @Sendable (String, String, [String: any Sendable]?, String?) async throws -> (Int, [String: any Sendable])

    let transport: Transport
    let key: ES256PrivateKey
    let apiKey: String
    let deviceID: String
    let keyBound: Bool
    /// The offline-code secret the login answer gave (base32); `nil` with offline codes off.
    let offlineSecret: String?

    /// Logs in as a new trusted device with a key of its own.
    static func signIn(email: String, password: String, name: String, transport: @escaping Transport) async throws -> SimulatedDevice {
        let key = ES256PrivateKey()
        let publicKey = try DeviceKey(signingKey: key)
        let (status, body) = try await transport(
            "POST", "/api/mobile/auth/login",
            ["email": email, "password": password, "deviceName": name, "platform": "countersign-simulator", "publicKey": publicKey.jwk],
            nil)
        guard status == 200, let apiKey = body["apiKey"] as? String, let device = body["device"] as? [String: any Sendable],
            let deviceID = device["id"] as? String
        else {
            throw SimulatorError("sign-in refused (\(status)): \(body["message"] as? String ?? "no message")")
        }
        return SimulatedDevice(
            transport: transport, key: key, apiKey: apiKey, deviceID: deviceID, keyBound: device["keyBound"] as? Bool ?? false,
            offlineSecret: (body["offline"] as? [String: any Sendable])?["secret"] as? String)
    }

    /// The offline code this device shows at `date` (RFC 6238, as an authenticator app shows it).
    func offlineCode(at date: Date = Date()) -> String? {
        guard let secret = offlineSecret.flatMap(Base32.decode) else { return nil }
        return TOTP.code(secret: secret, step: TOTP.step(at: date))
    }

    /// The user's pending requests, newest first.
    func pending() async throws -> [[String: any Sendable]] {
        let (status, body) = try await transport("GET", "/api/mobile/approvals/pending", nil, apiKey)
        guard status == 200 else { throw SimulatorError("listing pending requests failed (\(status))") }
        return body["approvals"] as? [[String: any Sendable]] ?? []
    }

    /// Answers one request, signed with the device key; a fraud report is part of what is signed.
    func answer(
        _ requestID: String, decision: ApprovalDecision, numberCode: String?, reportFraud: Bool = false
    ) async throws -> (
        Int, [String: any Sendable]
    ) {
        let payload = AnswerSignature.Payload(
            requestId: requestID, decision: decision.rawValue, numberCode: numberCode, iat: Int(Date().timeIntervalSince1970),
            deviceId: deviceID, fraud: reportFraud ? true : nil)
        var body: [String: any Sendable] = ["decision": decision.rawValue, "signature": try await AnswerSignature.sign(payload, with: key)]
        if let numberCode { body["numberCode"] = numberCode }
        if reportFraud { body["reportFraud"] = true }
        return try await transport("POST", "/api/mobile/approvals/\(requestID)/respond", body, apiKey)
    }
}

struct SimulatorError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
