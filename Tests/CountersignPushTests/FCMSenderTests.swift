import AsyncHTTPClient
import CountersignCore
import FakeFCM
import Foundation
import Logging
import NIOCore
import Testing

@testable import CountersignPush

@Suite struct FCMSenderTests {
    let logger = Logger(label: "fcm-sender-test")

    @Test(arguments: FakeFCMHarness.Transport.allCases) func aPromptReachesTheFakeWellFormedAndSigned(
        transport: FakeFCMHarness.Transport
    ) async throws {
        try await FakeFCMHarness.run(transport: transport) { harness in
            let outcome = await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("token-one"), logger: logger)
            #expect(outcome == .sent)
            #expect(harness.fake.rejections.isEmpty)
            let received = try #require(harness.fake.received.first)
            #expect(received.token == "token-one")
            #expect(received.data["type"] == "approval_request")
            #expect(received.data["requestId"] == "req-AAAAAAAAAAAAAAAAAAAA")
            #expect(received.data["action"] == "password_reset")
            #expect(harness.fake.exchanges == 1)
            #expect(harness.sender.health.rawValue == "ok")
        }
    }

    @Test(arguments: FakeFCMHarness.Transport.allCases) func manySendsShareOneTokenExchange(transport: FakeFCMHarness.Transport) async throws {
        try await FakeFCMHarness.run(transport: transport) { harness in
            let outcomes = await withTaskGroup(of: PushOutcome.self) { group in
                for index in 0..<40 {
                    group.addTask {
                        await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("token-\(index)"), logger: logger)
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes.allSatisfy { $0 == .sent })
            // Every device got its message (on a busy machine an answer may come after the send's
            // timeout, and that send is tried again: push is at least once, so count devices, not sends).
            #expect(Set(harness.fake.received.map(\.token)).count == 40)
            // One token issued for all 40. (The provider's own count is of attempts: when the
            // whole suite starts at once, an exchange has outlasted its 15 s timeout and been
            // tried again, with still one token issued; that count measured the machine.)
            #expect(harness.fake.exchanges == 1)
        }
    }

    @Test(arguments: FakeFCMHarness.Transport.allCases) func aTokenIsRefreshedAheadOfItsExpiry(transport: FakeFCMHarness.Transport) async throws {
        try await FakeFCMHarness.run(transport: transport) { harness in
            // Valid for 600 s: cached, and still used with 301 s left; refreshed within the 5-minute margin.
            harness.fake.setTokenLifetime(600)
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("a"), logger: logger) == .sent)
            harness.clock.advance(299)
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("b"), logger: logger) == .sent)
            #expect(harness.fake.exchanges == 1)
            harness.clock.advance(2)
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("c"), logger: logger) == .sent)
            #expect(harness.fake.exchanges == 2)
        }
    }

    @Test(arguments: FakeFCMHarness.Transport.allCases) func aFailedEarlyRefreshKeepsUsingTheStillValidToken(
        transport: FakeFCMHarness.Transport
    ) async throws {
        try await FakeFCMHarness.run(transport: transport) { harness in
            // Valid for 600 s: within the 5-minute refresh margin 301 s later, but not expired.
            harness.fake.setTokenLifetime(600)
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("a"), logger: logger) == .sent)
            harness.clock.advance(301)
            harness.fake.failTokenExchanges(1)
            // The refresh fails; the current token still works, and is used.
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("b"), logger: logger) == .sent)
            #expect(harness.fake.exchanges == 1)
            // The next send tries again, and gets a new token.
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("c"), logger: logger) == .sent)
            #expect(harness.fake.exchanges == 2)
        }
    }

    @Test(arguments: FakeFCMHarness.Transport.allCases) func unregisteredTokensAreMarkedDeadAndNotRetried(
        transport: FakeFCMHarness.Transport
    ) async throws {
        try await FakeFCMHarness.run(transport: transport) { harness in
            harness.fake.script("gone-token", [.unregistered])
            harness.fake.script("other-sender", [.senderMismatch])
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("gone-token"), logger: logger) == .tokenDead)
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("other-sender"), logger: logger) == .tokenDead)
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("alive"), logger: logger) == .sent)
            #expect(harness.deadTokens.tokens == ["gone-token", "other-sender"])
            #expect(harness.fake.received.filter { $0.token == "gone-token" }.count == 1)
        }
    }

    @Test(arguments: FakeFCMHarness.Transport.allCases) func aBare404Or403IsAConfigurationFaultAndDisablesNothing(
        transport: FakeFCMHarness.Transport
    ) async throws {
        try await FakeFCMHarness.run(transport: transport) { harness in
            // A wrong project id or endpoint: 404 without UNREGISTERED.
            harness.fake.script("a", [.error(httpStatus: 404, status: "NOT_FOUND", errorCode: nil)])
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("a"), logger: logger) == .misconfigured)
            // Health names only http-api.md's values: a configuration to check is auth_error.
            #expect(harness.sender.health.rawValue == "auth_error")
            // A service account without the right to send: 403 without SENDER_ID_MISMATCH.
            harness.fake.script("b", [.error(httpStatus: 403, status: "PERMISSION_DENIED", errorCode: nil)])
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("b"), logger: logger) == .authError)
            #expect(harness.sender.health.rawValue == "auth_error")
            #expect(harness.deadTokens.tokens.isEmpty)
            // Once fixed, a send succeeds and health recovers.
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("c"), logger: logger) == .sent)
            #expect(harness.sender.health.rawValue == "ok")
        }
    }

    @Test func onlyFCMsOwnWordMakesATokenDead() {
        func classify(_ status: Int, _ body: String) -> FCMFailure {
            FCMFailure.classify(httpStatus: status, body: Data(body.utf8), retryAfter: nil)
        }
        let fcmError = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
        #expect(classify(404, #"{"error":{"status":"NOT_FOUND","details":[{"@type":"\#(fcmError)","errorCode":"UNREGISTERED"}]}}"#).tokenIsDead)
        #expect(classify(403, #"{"error":{"status":"PERMISSION_DENIED","details":[{"errorCode":"SENDER_ID_MISMATCH"}]}}"#).tokenIsDead)
        #expect(
            classify(
                400,
                #"{"error":{"status":"INVALID_ARGUMENT","details":[{"errorCode":"INVALID_ARGUMENT"},{"fieldViolations":[{"field":"message.token"}]}]}}"#
            ).tokenIsDead)
        // Not the token: configuration or our own message.
        let notFound = classify(404, #"{"error":{"status":"NOT_FOUND","message":"Requested entity was not found."}}"#)
        #expect(!notFound.tokenIsDead && notFound.isMisconfiguration)
        let html = classify(404, "<html><body>Not Found</body></html>")
        #expect(!html.tokenIsDead && html.isMisconfiguration)
        let denied = classify(403, #"{"error":{"status":"PERMISSION_DENIED","message":"Permission denied"}}"#)
        #expect(!denied.tokenIsDead && denied.isAuthFault)
        let badField = classify(
            400, #"{"error":{"status":"INVALID_ARGUMENT","details":[{"fieldViolations":[{"field":"message.android.ttl"}]}]}}"#)
        #expect(!badField.tokenIsDead && !badField.isRetryable)
    }

    @Test func errorCodeThenStatusThenHTTPStatusDecide() {
        func classify(_ status: Int, _ body: String) -> FCMFailure {
            FCMFailure.classify(httpStatus: status, body: Data(body.utf8), retryAfter: nil)
        }
        // FCM's errorCode over Google's status and the HTTP status.
        #expect(classify(400, #"{"error":{"status":"INVALID_ARGUMENT","details":[{"errorCode":"UNREGISTERED"}]}}"#).tokenIsDead)
        // The status over the HTTP status.
        #expect(classify(500, #"{"error":{"status":"UNAVAILABLE"}}"#).shortDescription == "unavailable")
        #expect(classify(500, #"{"error":{"status":"NOT_FOUND"}}"#).isMisconfiguration)
        // An errorCode not known here (FCM's UNSPECIFIED_ERROR) gives way to the status, not to the HTTP status.
        let unspecified = classify(400, #"{"error":{"status":"UNAVAILABLE","details":[{"errorCode":"UNSPECIFIED_ERROR"}]}}"#)
        #expect(unspecified.isRetryable && unspecified.shortDescription == "unavailable")
        // Neither known: the HTTP status; a 502 may be a proxy's HTML page.
        let page = classify(502, "<html><head><title>502 Bad Gateway</title></head></html>")
        #expect(page.isRetryable && page.shortDescription == "unavailable")
        #expect(classify(504, #"{"error":{"status":"SOMETHING_NEW"}}"#).isRetryable)
    }

    @Test(arguments: FakeFCMHarness.Transport.allCases) func unavailableIsRetriedNoSoonerThanRetryAfter(
        transport: FakeFCMHarness.Transport
    ) async throws {
        try await FakeFCMHarness.run(transport: transport) { harness in
            harness.fake.script("flaky", [.unavailable(retryAfter: 1), .ok])
            let outcome = await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("flaky"), logger: logger)
            #expect(outcome == .sent)
            let attempts = harness.fake.received.filter { $0.token == "flaky" }
            #expect(attempts.count == 2)
            #expect(attempts[1].at.timeIntervalSince(attempts[0].at) >= 1.0)
        }
    }

    @Test(arguments: FakeFCMHarness.Transport.allCases) func aQuotaRefusalIsRetriedNoSoonerThanRetryAfter(
        transport: FakeFCMHarness.Transport
    ) async throws {
        try await FakeFCMHarness.run(transport: transport) { harness in
            let quota = FakeFCM.Answer.error(httpStatus: 429, status: "RESOURCE_EXHAUSTED", errorCode: "QUOTA_EXCEEDED", retryAfter: 1)
            harness.fake.script("busy", [quota, .ok])
            let outcome = await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("busy"), logger: logger)
            #expect(outcome == .sent)
            let attempts = harness.fake.received.filter { $0.token == "busy" }
            #expect(attempts.count == 2)
            #expect(attempts[1].at.timeIntervalSince(attempts[0].at) >= 1.0)
            #expect(harness.deadTokens.tokens.isEmpty)
        }
    }

    @Test(arguments: FakeFCMHarness.Transport.allCases) func aBadRequestIsNotRetried(transport: FakeFCMHarness.Transport) async throws {
        try await FakeFCMHarness.run(transport: transport) { harness in
            harness.fake.script("bad", [.invalidArgument, .ok])
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("bad"), logger: logger) == .rejected)
            #expect(harness.fake.received.filter { $0.token == "bad" }.count == 1)
            #expect(harness.deadTokens.tokens.isEmpty)
        }
    }

    @Test(arguments: FakeFCMHarness.Transport.allCases) func aRefusedAccessTokenIsRefreshedAndTheSendRetriedOnce(
        transport: FakeFCMHarness.Transport
    ) async throws {
        try await FakeFCMHarness.run(transport: transport) { harness in
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("first"), logger: logger) == .sent)
            harness.fake.refuseNextAccessToken()
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("second"), logger: logger) == .sent)
            #expect(harness.fake.exchanges == 2)
            #expect(harness.fake.received.filter { $0.token == "second" }.count == 1)
        }
    }

    @Test(arguments: FakeFCMHarness.Transport.allCases) func aRefusedAccessTokenIsRefreshedOnceAndNotAgain(
        transport: FakeFCMHarness.Transport
    ) async throws {
        try await FakeFCMHarness.run(transport: transport) { harness in
            // Every send to this token answers a plain 401, as if each fresh access token were refused too.
            harness.fake.script("refused", [.error(httpStatus: 401, status: "UNAUTHENTICATED", errorCode: nil)])
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("refused"), logger: logger) == .authError)
            #expect(harness.fake.received.filter { $0.token == "refused" }.count == 2)
            #expect(harness.fake.exchanges == 2)
            #expect(harness.sender.health.rawValue == "auth_error")
            #expect(harness.deadTokens.tokens.isEmpty)
        }
    }

    @Test(arguments: FakeFCMHarness.Transport.allCases) func aProxysHTMLPageOn502IsRetried(transport: FakeFCMHarness.Transport) async throws {
        try await FakeFCMHarness.run(transport: transport, configure: { $0.baseBackoff = 0.05 }) { harness in
            harness.fake.script("proxied", [.html(httpStatus: 502), .ok])
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("proxied"), logger: logger) == .sent)
            let attempts = harness.fake.received.filter { $0.token == "proxied" }
            #expect(attempts.map(\.answeredOK) == [false, true])
            #expect(harness.deadTokens.tokens.isEmpty)
            #expect(harness.sender.health.rawValue == "ok")
        }
    }

    @Test(arguments: FakeFCMHarness.Transport.allCases) func aMessageOverFCMsLimitIsRefusedWithoutASend(
        transport: FakeFCMHarness.Transport
    ) async throws {
        try await FakeFCMHarness.run(transport: transport) { harness in
            // The whole body at exactly 4,096 bytes is sent; one byte more is not.
            var message = try #require(FCMMessageBuilder.message(for: FakeFCMHarness.prompt(), token: "", now: Date()))
            let empty = try #require(try FCMMessageBuilder.encode(message)).count
            message.token = String(repeating: "t", count: FCMMessageBuilder.maximumBytes - empty)
            #expect(try FCMMessageBuilder.encode(message)?.count == FCMMessageBuilder.maximumBytes)
            message.token += "t"
            #expect(try FCMMessageBuilder.encode(message) == nil)
            // A device token that long (a device sends its own) is refused here, not at FCM.
            let long = String(repeating: "t", count: 5_000)
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device(long), logger: logger) == .rejected)
            #expect(harness.fake.received.isEmpty)
            #expect(harness.fake.rejections.isEmpty)
            #expect(harness.deadTokens.tokens.isEmpty)
        }
    }

    @Test(arguments: FakeFCMHarness.Transport.allCases) func backOffDoublesEachAttemptWithJitterAndNeverUndercutsRetryAfter(
        transport: FakeFCMHarness.Transport
    ) async throws {
        try await FakeFCMHarness.run(transport: transport, configure: { $0.baseBackoff = 1 }) { harness in
            for attempt in 1...5 {
                let nominal = pow(2, Double(attempt - 1))
                let delays = (0..<200).map { _ in harness.sender.backoff(attempt: attempt, retryAfter: nil) }
                #expect(delays.allSatisfy { (0.5 * nominal...1.5 * nominal).contains($0) }, "attempt \(attempt)")
                // Spread over the range, not one fixed value (200 draws all in one half: about 1 in 10^60).
                #expect(delays.contains { $0 < nominal } && delays.contains { $0 > nominal }, "attempt \(attempt)")
            }
            #expect(harness.sender.backoff(attempt: 1, retryAfter: 30) == 30)
            #expect(harness.sender.backoff(attempt: 5, retryAfter: 0.1) >= 8)
        }
    }

    @Test(arguments: FakeFCMHarness.Transport.allCases) func apnsCredentialFaultsAreNotRetriedAndShowInHealth(
        transport: FakeFCMHarness.Transport
    ) async throws {
        try await FakeFCMHarness.run(transport: transport) { harness in
            harness.fake.script("ios", [.thirdPartyAuth, .ok])
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("ios"), logger: logger) == .authError)
            #expect(harness.fake.received.count == 1)
            #expect(harness.fake.exchanges == 1)
            #expect(harness.sender.health.rawValue == "auth_error")
        }
    }

    /// Retry-After 600 s against a prompt of 60: waiting it out would outlast the time limit.
    @Test(.timeLimit(.minutes(5)), arguments: FakeFCMHarness.Transport.allCases)
    func aPushThatCannotArriveBeforeExpiryIsDropped(transport: FakeFCMHarness.Transport) async throws {
        try await FakeFCMHarness.run(transport: transport) { harness in
            // Warm up: token exchange and connection.
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("warm"), logger: logger) == .sent)
            harness.fake.script("slow", [.unavailable(retryAfter: 600), .ok])
            let outcome = await harness.sender.send(FakeFCMHarness.prompt(expiresIn: 60), to: FakeFCMHarness.device("slow"), logger: logger)
            // Dropped at once rather than waiting out the Retry-After.
            #expect(outcome == .dropped)
            #expect(harness.fake.received.filter { $0.token == "slow" }.count == 1)
            #expect(harness.sender.health.rawValue == "degraded")
            // Already expired: nothing is sent at all.
            #expect(await harness.sender.send(FakeFCMHarness.prompt(expiresIn: -1), to: FakeFCMHarness.device("late"), logger: logger) == .dropped)
            #expect(!harness.fake.received.contains { $0.token == "late" })
        }
    }

    @Test(arguments: FakeFCMHarness.Transport.allCases) func retriesStopAfterTheAttemptLimit(transport: FakeFCMHarness.Transport) async throws {
        try await FakeFCMHarness.run(
            transport: transport,
            configure: {
                $0.maxAttempts = 3
                $0.baseBackoff = 0.05
            }
        ) { harness in
            harness.fake.script("down", [.error(httpStatus: 500, status: "INTERNAL", errorCode: "INTERNAL")])
            #expect(await harness.sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("down"), logger: logger) == .dropped)
            #expect(harness.fake.received.count == 3)
        }
    }

    @Test func anAssertionSignedWithAnotherKeyIsRefused() async throws {
        try await FakeFCMHarness.run { harness in
            let other = try await FakeFCM(newKey: true)
            var json = try JSONSerialization.jsonObject(with: try harness.fake.serviceAccountJSON(base: harness.base)) as! [String: Any]
            json["private_key"] = other.privateKeyPEM
            let account = try ServiceAccount.parse(try JSONSerialization.data(withJSONObject: json), source: "test")
            // Hang detectors, as the harness's own client: under a loaded suite a connection took more than 10 s.
            let client = try PushSetup.patientClient(caFile: nil)
            let tokens = try await AccessTokenProvider(account: account, client: client, logger: logger, exchangeTimeout: hangDetector)
            await #expect(throws: FCMFailure.self) { _ = try await tokens.token() }
            try await client.shutdown()
            #expect(harness.fake.rejections.contains { $0.contains("signature") })
        }
    }
}

@Suite struct RetryAfterTests {
    @Test func secondsAndHTTPDatesAreBothHonoured() {
        let now = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT
        #expect(FCMFailure.retryAfter("30", now: now) == 30)
        #expect(FCMFailure.retryAfter("Sun, 06 Nov 1994 08:50:07 GMT", now: now) == 30)
        // A date already past means: now.
        #expect(FCMFailure.retryAfter("Sun, 06 Nov 1994 08:49:00 GMT", now: now) == 0)
        #expect(FCMFailure.retryAfter("soon", now: now) == nil)
        #expect(FCMFailure.retryAfter("-5", now: now) == nil)
        #expect(FCMFailure.retryAfter(nil, now: now) == nil)
    }
}
