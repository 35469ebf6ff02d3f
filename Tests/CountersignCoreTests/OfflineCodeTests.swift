import CountersignStore
import CountersignWire
import Foundation
import Logging
import PostgresTestSupport
import Testing

@testable import CountersignCore

/// Offline codes (RFC 6238) and bypass codes, down to the broker and a real
/// SQLite file, on a clock the tests move.
@Suite struct OfflineCodeTests {
    typealias Harness = ApprovalBrokerTests.Harness

    /// RFC 6238 Appendix B, the SHA-1 rows: the secret is the ASCII of "12345678901234567890", codes of 8 digits.
    @Test(
        arguments: [
            (59, "94287082"), (1_111_111_109, "07081804"), (1_111_111_111, "14050471"), (1_234_567_890, "89005924"),
            (2_000_000_000, "69279037"), (20_000_000_000, "65353130"),
        ] as [(Int64, String)])
    func theRFC6238TestVectorsHold(time: Int64, expected: String) {
        let secret = Array("12345678901234567890".utf8)
        let step = TOTP.step(at: Date(timeIntervalSince1970: TimeInterval(time)))
        #expect(TOTP.code(secret: secret, step: step, digits: 8) == expected)
        // Six digits, as the daemon and authenticator apps use them: the same number's last six.
        #expect(TOTP.code(secret: secret, step: step) == String(expected.suffix(6)))
    }

    /// RFC 4648's base32 vectors (without padding, as `otpauth://` secrets are written).
    @Test func base32MatchesRFC4648() {
        let vectors = [("", ""), ("f", "MY"), ("fo", "MZXQ"), ("foo", "MZXW6"), ("foob", "MZXW6YQ"), ("fooba", "MZXW6YTB"), ("foobar", "MZXW6YTBOI")]
        for (plain, encoded) in vectors {
            #expect(Base32.encode(Array(plain.utf8)) == encoded)
            #expect(Base32.decode(encoded) == Array(plain.utf8))
        }
        #expect(Base32.decode("mzxw6ytboi======") == Array("foobar".utf8))
        #expect(Base32.decode("MZXW1") == nil)
    }

    @Test func onlyDigitsOfTheTwoLengthsAreCodes() {
        #expect(AnswerCode("012345") == .offline("012345"))
        #expect(AnswerCode("4821390577") == .bypass("4821390577"))
        #expect(AnswerCode("48213-90577") == .bypass("4821390577"))
        for text in ["", "12345", "1234567", "12a456", "１２３４５６", "4821-390577", "48213 90577", "+12345", "123456789012"] {
            #expect(AnswerCode(text) == nil, "\(text)")
        }
    }

    @Test func aSecretIsSealedAndItsURINamesTheUser() throws {
        let keys = SecretKeys.random()
        let issued = try #require(try OfflineSecrets(keys: keys, enabled: true).issue())
        #expect(Base32.decode(issued.secret)?.count == 20)
        #expect(try keys.openDeviceSecret(issued.sealed) == Data(Base32.decode(issued.secret)!))
        #expect(issued.sealed.range(of: Data(Base32.decode(issued.secret)!)) == nil)
        #expect(throws: (any Error).self) { try SecretKeys.random().openDeviceSecret(issued.sealed) }
        #expect(
            issued.uri(email: "ana+x@example.com")
                == "otpauth://totp/Countersign:ana%2Bx@example.com?secret=\(issued.secret)&issuer=Countersign&algorithm=SHA1&digits=6&period=30")
        #expect(try OfflineSecrets(keys: keys, enabled: false).issue() == nil)
    }

    // MARK: Through the broker

    struct Setup {
        let harness: Harness
        let broker: ApprovalBroker
        let codes: CodeAnswers
        let userID: String
        let device: Device
        let secret: [UInt8]

        func code(_ offset: Int64) -> String {
            TOTP.code(secret: secret, step: TOTP.step(at: harness.clock.now) + offset)
        }

        func reset() async throws -> ApprovalRequest {
            try await broker.initiate(email: OfflineCodeTests.email, newPasswordHash: "new", requester: ApprovalBrokerTests.requester).request
        }

        /// A relying service's approval for the user: what offline codes answer (never a password reset).
        func approval() async throws -> ApprovalRequest {
            let prompt = ApprovalPrompt(
                integrationID: "acme", integrationName: "Acme", userEmail: OfflineCodeTests.email, title: "Sign in?", body: "", context: [:])
            return try await broker.initiate(
                for: .user(id: userID), action: ApprovalAction(rawValue: "sign_in")!, newPasswordHash: nil,
                requester: ApprovalBrokerTests.requester, prompt: prompt, draft: broker.draft())
        }

        func answer(_ code: String, _ request: ApprovalRequest) async throws -> CodeAnswers.Outcome {
            try await codes.answer(
                AnswerCode(code)!, to: request.id, integrationID: request.integrationID, context: .system, logger: Logger(label: "test"))
        }
    }

    static let email = "ana@example.com"

    static func result<T>(_ body: () async throws -> T) async -> Result<T, any Error> {
        do {
            return .success(try await body())
        } catch {
            return .failure(error)
        }
    }

    static func withSetup(
        _ backend: Backend, mayApproveResets: Bool = true, deviceKeys: DeviceKeyPolicy = .optional, enabled: Bool = true,
        _ body: (Setup) async throws -> Void
    ) async throws {
        try await ApprovalBrokerTests.withHarness(backend) { harness in
            let user = try await harness.store.createUser(email: email, passwordHash: "hash")
            let keys = SecretKeys.random()
            let issued = try #require(try OfflineSecrets(keys: keys, enabled: true).issue())
            let device = try await harness.store.registerDevice(
                DeviceRegistration(
                    userID: user.id, name: "phone", platform: "android", push: nil, apiKeyHash: "k", publicKey: nil,
                    mayApproveResets: mayApproveResets, offlineSecret: issued.sealed),
                maxDevices: 20
            ).device
            let broker = try await harness.broker()
            let clock = harness.clock
            let codes = CodeAnswers(
                broker: broker, store: harness.store, secrets: OfflineSecrets(keys: keys, enabled: enabled), deviceKeys: deviceKeys,
                audit: harness.audit, now: { clock.now })
            try await body(
                Setup(
                    harness: harness, broker: broker, codes: codes, userID: user.id, device: device,
                    secret: try #require(Base32.decode(issued.secret))))
        }
    }

    /// The step before, now and after are accepted; two back is not; each
    /// (device, step) once; nothing older than the last step used.
    @Test(arguments: Backend.available) func theStepWindowAndReplays(backend: Backend) async throws {
        try await Self.withSetup(backend) { setup in
            let first = try await setup.approval()
            #expect(try await setup.answer(setup.code(-2), first) == .wrong)
            #expect(try await setup.answer(setup.code(2), first) == .wrong)
            guard case .approved(let approved) = try await setup.answer(setup.code(-1), first) else {
                Issue.record("the previous step's code was refused")
                return
            }
            #expect(approved.via == .offlineCode)
            #expect(approved.respondingDeviceID == setup.device.id)
            #expect(approved.deviceKeyBound == false)
            #expect(try await setup.harness.store.request(id: first.id)?.via == .offlineCode)

            let second = try await setup.approval()
            #expect(try await setup.answer(setup.code(-1), second) == .wrong, "a code used once")
            guard case .approved = try await setup.answer(setup.code(1), second) else {
                Issue.record("the next step's code was refused")
                return
            }
            // Thirty seconds on, the code of the step that was current is one back, but older than the last one used.
            setup.harness.clock.advance(30)
            let third = try await setup.approval()
            #expect(try await setup.answer(setup.code(-1), third) == .wrong)
            guard case .approved = try await setup.answer(setup.code(1), third) else {
                Issue.record("a code newer than the last one used was refused")
                return
            }
        }
    }

    @Test(arguments: Backend.available) func theFifthWrongCodeDeniesTheRequest(backend: Backend) async throws {
        try await Self.withSetup(backend) { setup in
            let request = try await setup.approval()
            let wrong = setup.code(0) == "000000" ? "000001" : "000000"
            for _ in 1...4 { #expect(try await setup.answer(wrong, request) == .wrong) }
            #expect(try await setup.harness.store.request(id: request.id)?.state == .pending)
            #expect(try await setup.answer(wrong, request) == .wrong)
            let denied = try #require(try await setup.harness.store.request(id: request.id))
            #expect(denied.state == .denied)
            #expect(denied.via == nil)
            #expect(setup.harness.events(.offlineCodeExhausted).count == 1)
            await #expect(throws: BrokerError.refused(.conflict(.denied))) { try await setup.answer(setup.code(0), request) }
        }
    }

    /// Many wrong codes at once still deny exactly once, on the fifth.
    @Test(arguments: Backend.available) func parallelWrongCodesDenyOnce(backend: Backend) async throws {
        try await Self.withSetup(backend) { setup in
            let request = try await setup.approval()
            let wrong = setup.code(0) == "000000" ? "000001" : "000000"
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<12 { group.addTask { _ = try? await setup.answer(wrong, request) } }
                try await group.waitForAll()
            }
            #expect(try await setup.harness.store.request(id: request.id)?.state == .denied)
            let audit = setup.harness.audit.take().events
            #expect(audit.filter { $0.kind == .offlineCodeExhausted }.count == 1)
        }
    }

    @Test(arguments: Backend.available) func aCodeAndTheDevicesAnswerRaceToOneWinner(backend: Backend) async throws {
        try await Self.withSetup(backend) { setup in
            for round in 0..<6 {
                setup.harness.clock.advance(30)
                let request = try await setup.approval()
                let code = setup.code(0)
                async let typed = Self.result { try await setup.answer(code, request) }
                async let answered = Self.result {
                    try await setup.broker.respond(
                        to: request.id, userID: setup.userID, deviceID: setup.device.id, decision: .deny, numberCode: nil)
                }
                let (byCode, byDevice) = await (typed, answered)
                let stored = try #require(try await setup.harness.store.request(id: request.id))
                switch (byCode, byDevice) {
                case (.success(.approved(_)), .failure):
                    #expect(stored.state == .approved && stored.via == .offlineCode, "round \(round)")
                case (.failure, .success):
                    #expect(stored.state == .denied && stored.via == .push, "round \(round)")
                default:
                    Issue.record("round \(round): not exactly one winner: \(byCode) \(byDevice)")
                }
            }
        }
    }

    /// trust.md: a device an integration enrolled cannot approve a password
    /// reset, by code either; it can approve the integration's own approvals.
    @Test(arguments: Backend.available) func anEnrolledDevicesCodeDoesNotApproveAPasswordReset(backend: Backend) async throws {
        try await Self.withSetup(backend, mayApproveResets: false) { setup in
            let reset = try await setup.reset()
            #expect(try await setup.answer(setup.code(0), reset) == .wrong)
            let prompt = ApprovalPrompt(
                integrationID: "acme", integrationName: "Acme", userEmail: Self.email, title: "Sign in?", body: "", context: [:])
            let approval = try await setup.broker.initiate(
                for: .user(id: setup.userID), action: ApprovalAction(rawValue: "sign_in")!, newPasswordHash: nil,
                requester: ApprovalBrokerTests.requester, prompt: prompt, draft: setup.broker.draft())
            guard case .approved = try await setup.answer(setup.code(0), approval) else {
                Issue.record("the enrolled device's code did not approve its integration's approval")
                return
            }
        }
    }

    /// trust.md, "A code has one purpose": an offline code is typed into relying
    /// services' pages, so it never approves a password reset, not even from a
    /// device that may; it still approves the user's other approvals.
    @Test(arguments: Backend.available) func anOfflineCodeNeverApprovesAPasswordReset(backend: Backend) async throws {
        try await Self.withSetup(backend) { setup in
            let reset = try await setup.reset()
            #expect(setup.device.mayApproveResets)
            #expect(try await setup.answer(setup.code(0), reset) == .wrong)
            #expect(try await setup.harness.store.request(id: reset.id)?.state == .pending)
            guard case .approved = try await setup.answer(setup.code(0), try await setup.approval()) else {
                Issue.record("the code refused for the reset was spent")
                return
            }
        }
    }

    @Test(arguments: Backend.available) func withKeysRequiredAnUnboundDevicesCodeDoesNotCount(backend: Backend) async throws {
        try await Self.withSetup(backend, deviceKeys: .required) { setup in
            let reset = try await setup.approval()
            #expect(try await setup.answer(setup.code(0), reset) == .wrong)
        }
    }

    @Test(arguments: Backend.available) func withOfflineCodesOffNoCodeCounts(backend: Backend) async throws {
        try await Self.withSetup(backend, enabled: false) { setup in
            let reset = try await setup.approval()
            #expect(try await setup.answer(setup.code(0), reset) == .wrong)
        }
    }

    @Test(arguments: Backend.available) func bypassCodesWorkOnceWhereTheyWereIssuedFor(backend: Backend) async throws {
        try await Self.withSetup(backend) { setup in
            let codes = [BypassCode.generate(), BypassCode.generate()]
            let hashes = codes.map { BypassCode.hash($0, userID: setup.userID, keys: setup.codes.secrets.keys) }
            let now = setup.harness.clock.now
            try await setup.harness.store.replaceBypassCodes(
                userID: setup.userID, codeHashes: hashes, forPasswordReset: false, expiresAt: now.addingTimeInterval(86_400), now: now)
            let reset = try await setup.reset()
            #expect(try await setup.answer(codes[0], reset) == .wrong, "not issued for password resets")
            try await setup.harness.store.replaceBypassCodes(
                userID: setup.userID, codeHashes: hashes, forPasswordReset: true, expiresAt: now.addingTimeInterval(86_400), now: now)
            guard case .approved(let approved) = try await setup.answer(codes[0], reset) else {
                Issue.record("a bypass code for resets was refused")
                return
            }
            #expect(approved.via == .bypassCode)
            #expect(approved.respondingDeviceID == nil)
            let next = try await setup.reset()
            #expect(try await setup.answer(codes[0], next) == .wrong, "used once")
            // Past its validity the other one is refused too.
            setup.harness.clock.advance(86_400)
            #expect(try await setup.answer(codes[1], try await setup.reset()) == .wrong)
        }
    }

    /// However many guesses arrive at once, no more than the request's tries
    /// are ever checked: a right code among twenty parallel wrong ones gets in
    /// only if it drew one of the five tries.
    @Test(arguments: Backend.available) func parallelGuessesAreCheckedAtMostFiveTimes(backend: Backend) async throws {
        try await Self.withSetup(backend) { setup in
            let request = try await setup.approval()
            let right = setup.code(0)
            let wrong = right == "000000" ? "000001" : "000000"
            let outcomes = try await withThrowingTaskGroup(of: CodeAnswers.Outcome?.self) { group in
                for index in 0..<20 { group.addTask { try? await setup.answer(index == 13 ? right : wrong, request) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let audit = setup.harness.audit.take().events
            let checkedWrong = audit.filter { $0.kind == .codeRefused }.count
            let approved = outcomes.contains { if case .approved = $0 { true } else { false } }
            #expect(checkedWrong + (approved ? 1 : 0) <= CodeAnswers.wrongCodesAllowed)
            let stored = try #require(try await setup.harness.store.request(id: request.id))
            #expect(stored.state == (approved ? .approved : .denied))
        }
    }

    /// A request no one may answer (made while a fraud report silences the
    /// user) is not approved by the user's device code, nor by a bypass code.
    @Test(arguments: Backend.available) func aSilencedUsersRequestTakesNoCode(backend: Backend) async throws {
        try await Self.withSetup(backend) { setup in
            try await setup.harness.store.silencePrompts(userID: setup.userID, until: setup.harness.clock.now.addingTimeInterval(3600))
            let request = try await setup.reset()
            #expect(request.userID == nil)
            #expect(try await setup.answer(setup.code(0), request) == .wrong)
            let code = BypassCode.generate()
            let now = setup.harness.clock.now
            try await setup.harness.store.replaceBypassCodes(
                userID: setup.userID, codeHashes: [BypassCode.hash(code, userID: setup.userID, keys: setup.codes.secrets.keys)],
                forPasswordReset: true, expiresAt: now.addingTimeInterval(60), now: now)
            #expect(try await setup.answer(code, request) == .wrong)
        }
    }

    /// A bypass code typed while the device answers: if the device wins, the code is still unused.
    @Test(arguments: Backend.available) func aBypassCodeThatLosesTheRaceStaysUsable(backend: Backend) async throws {
        try await Self.withSetup(backend) { setup in
            let code = BypassCode.generate()
            let now = setup.harness.clock.now
            try await setup.harness.store.replaceBypassCodes(
                userID: setup.userID, codeHashes: [BypassCode.hash(code, userID: setup.userID, keys: setup.codes.secrets.keys)],
                forPasswordReset: true, expiresAt: now.addingTimeInterval(86_400), now: now)
            // Each race the device wins must leave the code usable for the next.
            var won = false
            for _ in 0..<8 where !won {
                let request = try await setup.reset()
                async let typed = Self.result { try await setup.answer(code, request) }
                async let answered = Self.result {
                    try await setup.broker.respond(to: request.id, userID: setup.userID, deviceID: setup.device.id, decision: .deny, numberCode: nil)
                }
                let (byCode, _) = await (typed, answered)
                if case .success(.approved) = byCode { won = true }
            }
            let last = try await setup.answer(code, try await setup.reset())
            if won {
                #expect(last == .wrong, "used once")
            } else {
                guard case .approved = last else {
                    Issue.record("the bypass code was spent by races it lost")
                    return
                }
            }
        }
    }

    @Test func aWebhookEventSaysHowTheApprovalWasAnswered() throws {
        let prompt = ApprovalPrompt(integrationID: "acme", integrationName: "Acme", userEmail: Self.email, title: "t", body: "", context: [:])
        let now = Date()
        var machine = ApprovalStateMachine(
            ApprovalRequest(
                id: "r", userID: "u", subject: "u", action: ApprovalAction(rawValue: "sign_in")!, state: .pending, createdAt: now,
                expiresAt: now.addingTimeInterval(60), completionWindow: 120, updatedAt: now, numberCode: nil, newPasswordHash: nil,
                requester: ApprovalBrokerTests.requester, prompt: prompt))
        guard case .persist(let transition) = machine.approveByCode(via: .bypassCode, deviceID: nil, at: now) else {
            Issue.record("not approved")
            return
        }
        let item = try #require(WebhookEvent.outboxItem(for: machine.request, after: transition))
        let event = try JSONDecoder().decode(WebhookEvent.self, from: item.payload)
        #expect(event.type == "approval.approved")
        #expect(event.data.via == "bypass_code")
        #expect(event.data.deviceId == nil)
    }
}
