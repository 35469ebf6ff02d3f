import AsyncHTTPClient
import CountersignCore
import CountersignPush
import FakeFCM
import Foundation
import Logging
import NIOCore
import Synchronization
import TestSupport
import Testing

/// How long the push tests' clients wait to connect, for an answer and for a token exchange:
/// a hang detector, not a speed (the servers they reach share the loaded test process, and
/// the daemon's 10-15 s ran out there).
let hangDetector = TimeAmount.seconds(120)

extension PushSetup {
    /// A client made as the daemon's, whose waits are ``hangDetector``.
    static func patientClient(caFile: String?) throws -> HTTPClient {
        try makeClient(caFile: caFile, connectTimeout: hangDetector, readTimeout: hangDetector)
    }
}

/// Runs a ``FakeFCM`` on 127.0.0.1 and an ``FCMSender`` pointed at it.
struct FakeFCMHarness {
    let fake: FakeFCM
    let base: String
    let sender: FCMSender
    let tokens: AccessTokenProvider
    let deadTokens: DeadTokens
    /// The clock the access token's remaining life is read on; tests move it by hand.
    let clock: Clock

    final class Clock: Sendable {
        private let current = Mutex(Date())
        var now: Date { current.withLock { $0 } }
        func advance(_ seconds: TimeInterval) { current.withLock { $0 += seconds } }
    }

    /// Records the tokens the sender reports dead, in order.
    final class DeadTokens: PushTokenStore {
        private let list = Mutex<[String]>([])
        var tokens: [String] { list.withLock { $0 } }
        func disablePush(deviceID: String, token: String) async throws { list.withLock { $0.append(token) } }
    }

    /// How the sender reaches the fake.
    enum Transport: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// Plain HTTP/1.1 through AsyncHTTPClient (an `http://` endpoint).
        case client
        /// HTTP/2 over TLS through ``HTTP2PushClient``, as FCM itself is reached.
        case frames
        var testDescription: String { rawValue }
    }

    static func run<T: Sendable>(
        transport: Transport = .client,
        configure: (inout FCMSender.Configuration) -> Void = { _ in },
        _ body: @Sendable (FakeFCMHarness) async throws -> T
    ) async throws -> T {
        let folder = try makeTemporaryFolder("fake-fcm")
        defer { try? FileManager.default.removeItem(at: folder) }
        let certificate = transport == .frames ? try TestCertificate() : nil
        let caFile = try certificate.map { try $0.caFile(in: folder) }
        let fake = try await FakeFCM()
        let logger = Logger(label: "fake-fcm-test")
        var configuration = FCMSender.Configuration(endpoint: "")
        // A hang detector, not a speed: when the whole suite starts at once an answer has come after
        // the 10 s default, the send was tried again, and a test of "not retried" saw two sends.
        configuration.requestTimeout = 120
        configure(&configuration)
        let settings = configuration
        return try await fake.serve(tls: try certificate?.serverConfiguration()) { base in
            let account = try ServiceAccount.parse(try fake.serviceAccountJSON(base: base), source: "fake")
            // The client's own connect and read timeouts (10 and 15 s) would undercut the 120 s below: under a
            // loaded suite a token exchange's answer came after 15 s, the send was tried again, and a test counting
            // exchanges saw one more.
            let client = try PushSetup.patientClient(caFile: caFile)
            let streams = transport == .frames ? try HTTP2PushClient(endpoint: base, caFile: caFile, connectTimeout: hangDetector) : nil
            let dead = DeadTokens()
            let clock = Clock()
            let result: Result<T, any Error>
            do {
                // A hang detector too: under a loaded suite an exchange has outlasted the 15 s default and been made again.
                let tokens = try await AccessTokenProvider(
                    account: account, client: client, logger: logger, now: { clock.now }, exchangeTimeout: hangDetector)
                var configuration = settings
                configuration.endpoint = base
                configuration.streams = streams
                let sender = FCMSender(account: account, tokens: tokens, client: client, configuration: configuration, deadTokens: dead)
                result = .success(
                    try await body(FakeFCMHarness(fake: fake, base: base, sender: sender, tokens: tokens, deadTokens: dead, clock: clock)))
            } catch {
                result = .failure(error)
            }
            await streams?.shutdown()
            try await client.shutdown()
            return try result.get()
        }
    }

    static func device(_ token: String) -> Device {
        Device(id: "device-\(token)", userID: "user-1", name: "Phone", platform: "iOS", push: .fcm(token), pushEnabled: true, createdAt: Date())
    }

    /// A prompt whose request lives an hour unless a test says otherwise: a
    /// suite on a busy machine can stall a test for a minute, and a prompt
    /// expiring under it would be dropped instead of sent or retried.
    static func prompt(id: String = "req-AAAAAAAAAAAAAAAAAAAA", expiresIn: TimeInterval = 3600) -> PushJob {
        .prompt(
            requestID: id, userID: "user-1", action: .passwordReset, expiresAt: Date().addingTimeInterval(expiresIn),
            requester: RequesterInfo(ip: "203.0.113.7", userAgent: "PhotoSync/2.3 iOS/18.1"))
    }
}
