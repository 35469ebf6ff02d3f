import CountersignCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// The approvals API of a relying service (`/v1/approvals`): create, status
/// with long poll, complete, cancel. The same broker, state machine, push,
/// expiry and audit as the phone reset; an integration sees only its own.
struct IntegrationApprovalsController: Sendable {
    let broker: ApprovalBroker
    let store: any IntegrationStore & UserAdministration
    let authenticator: IntegrationAuthenticator
    let abuse: RateLimitGuard
    let longPolls: LongPollSlots
    let keys: SecretKeys
    let codes: CodeAnswers

    func addRoutes(to group: RouterGroup<AppRequestContext>) {
        group.post("approvals", use: create)
        group.get("approvals/{approvalId}", use: status)
        group.post("approvals/{approvalId}/complete", use: complete)
        group.post("approvals/{approvalId}/cancel", use: cancel)
        group.post("approvals/{approvalId}/verify-code", use: verifyCode)
    }

    struct CreateBody: Decodable {
        var user: String
        var action: String
        var title: String
        var body: String?
        var context: [String: String]?
        var ttl: Int?
        var numberMatching: Bool?
        var wait: Int?
        var code: String?
    }

    /// A create as checked: what it means, hashed to recognise a repeat.
    struct Checked: Encodable {
        var user: String
        var action: String
        var title: String
        var body: String
        var context: [String: String]
        var ttl: Int?
        var numberMatching: Bool?
        /// Seconds the create waits for the approval's end (``waited(_:seconds:integration:request:context:)``).
        var wait: Int?
        /// An offline or bypass code the user typed with the request (a VPN's `password,123456`):
        /// checked as `verify-code` checks it, and answered as a `wait` is. A repeat is
        /// recognised by its keyed hash (``codeDigest``), never by the code itself.
        var code: AnswerCode?
        /// The code's hash under the daemon's key: a repeat with another code, or none, is another request.
        var codeDigest: String?

        enum CodingKeys: String, CodingKey {
            case user, action, title, body, context, ttl, numberMatching, wait, codeDigest
        }

        /// What the create answers with: the approval as it starts, or its end.
        var answersWithEnd: Bool { wait != nil || code != nil }

        var hash: String {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            return SecureToken.sha256Hex(String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self))
        }
    }

    struct CreateResponse: Codable {
        var approvalId: String
        var status: ApprovalState
        var expiresAt: String
        var numberCode: String?
    }

    static func check(_ body: CreateBody) throws -> Checked {
        let user = User.normalize(email: try Field.email(body.user))
        guard ApprovalAction.isWellFormed(body.action) else {
            throw APIError.invalidRequest("The field `action` must be 1 to 64 characters of a-z, 0-9, `_`, `.` or `-`.")
        }
        guard body.action != ApprovalAction.passwordReset.rawValue else {
            throw APIError.invalidRequest("The field `action` must not be `password_reset`: that action belongs to the phone reset.")
        }
        let title = try Field.text(body.title, "title", maxBytes: 4 * ApprovalPrompt.titleLimit)
        guard title.count <= ApprovalPrompt.titleLimit else {
            throw APIError.invalidRequest("The field `title` is longer than \(ApprovalPrompt.titleLimit) characters.")
        }
        let text = try Field.text(body.body ?? "", "body", maxBytes: 4 * ApprovalPrompt.bodyLimit, allowEmpty: true)
        guard text.count <= ApprovalPrompt.bodyLimit else {
            throw APIError.invalidRequest("The field `body` is longer than \(ApprovalPrompt.bodyLimit) characters.")
        }
        let context = body.context ?? [:]
        guard context.count <= ApprovalPrompt.contextKeysLimit else {
            throw APIError.invalidRequest("The field `context` has more than \(ApprovalPrompt.contextKeysLimit) keys.")
        }
        var checkedContext: [String: String] = [:]
        for (key, value) in context {
            let name = try Field.text(key, "context", maxBytes: ApprovalPrompt.contextKeyLimit)
            let checked = try Field.text(value, "context.\(name)", maxBytes: 4 * ApprovalPrompt.contextValueLimit, allowEmpty: true)
            guard checked.count <= ApprovalPrompt.contextValueLimit else {
                throw APIError.invalidRequest("The field `context.\(name)` is longer than \(ApprovalPrompt.contextValueLimit) characters.")
            }
            checkedContext[name] = checked
        }
        if let ttl = body.ttl, !(10...300).contains(ttl) {
            throw APIError.invalidRequest("The field `ttl` must be a whole number of seconds from 10 to 300.")
        }
        if let wait = body.wait, !(1...APILimits.maxCreateWaitSeconds).contains(wait) {
            throw APIError.invalidRequest("The field `wait` must be a whole number of seconds from 1 to \(APILimits.maxCreateWaitSeconds).")
        }
        return Checked(
            user: user, action: body.action, title: title, body: text, context: checkedContext, ttl: body.ttl, numberMatching: body.numberMatching,
            wait: body.wait, code: try body.code.map(Field.answerCode))
    }

    /// `Idempotency-Key`: at most 255 printable ASCII characters.
    static func idempotencyKey(_ request: Request) throws -> String? {
        guard let key = request.headers[HTTPField.Name("Idempotency-Key")!] else { return nil }
        guard !key.isEmpty, key.utf8.count <= IdempotencyRecord.maxKeyLength, key.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
            throw APIError.invalidRequest("The header `Idempotency-Key` must be 1 to 255 printable ASCII characters.")
        }
        return key
    }

    @Sendable func create(_ request: Request, context: AppRequestContext) async throws -> Response {
        let integration = try await authenticator.integration(for: request)
        var checked = try Self.check(try await request.decodeJSON(as: CreateBody.self, context: context))
        checked.codeDigest = checked.code.map { code in
            switch code {
            case .offline(let digits), .bypass(let digits): keys.hash(digits, context: "approval-create-code")
            }
        }
        guard checked.answersWithEnd else { return try await create(checked, integration: integration, request: request, context: context) }
        // The call waits: it takes a slot of the caller's address, as a long poll does, before any
        // approval is made (over the cap: 503, and nothing pushed or checked).
        let slot = context.clientKey
        guard longPolls.acquire(slot) else { throw APIError.unavailable }
        defer { longPolls.release(slot) }
        // A caller that reads only statuses (FreeRADIUS's rest module turns 404 into "notfound",
        // which a site may let through): every refusal of the user is 403, as any other end is.
        do {
            return try await create(checked, integration: integration, request: request, context: context)
        } catch let error as APIError where error.status == .notFound || error.status == .unprocessableContent {
            throw APIError(.forbidden, error.code, error.message)
        }
    }

    private func create(_ checked: Checked, integration: Integration, request: Request, context: AppRequestContext) async throws -> Response {
        let key = try Self.idempotencyKey(request)
        // Only a user the integration reaches: its own, granted to it, or (if the operator let it prompt
        // everyone) any user with a device. Anyone else, existing, device-less or not, is the same 404:
        // "has no device" (422) is told only of a user the integration reaches anyway.
        guard let found = try await store.user(email: checked.user, promptableBy: integration.id) else { throw APIError.userNotFound }
        let (user, reached, enrolled) = found
        guard reached || integration.promptsAllUsers else { throw APIError.userNotFound }
        // Whether the user has a device came with the user: the push dispatcher reads the devices themselves, once.
        guard enrolled else { throw reached ? APIError.notEnrolled : APIError.userNotFound }
        // A repeat answers as the first create did, while the user is still reached (checked above).
        // Hashed only when a repeat has to be recognised.
        let requestHash = key == nil ? "" : checked.hash
        if let key, let earlier = try await firstCreate(integration: integration, key: key, requestHash: requestHash) {
            return try await answer(earlier, checked: checked, integration: integration, request: request, context: context)
        }
        try await abuse.hit(
            .approvalsPerIntegration, integration.id, "Too many approvals created by this integration. Please slow down.", context: context,
            request: request)
        // Per relying service and user, then a looser bound on the user's sum: one
        // integration cannot use up the budget of another for the same person.
        try await abuse.hit(
            .approvalsPerUser, "\(integration.id):\(user.id)", "Too many approvals for this user. Please try again later.", context: context,
            request: request, userID: user.id)
        try await abuse.hit(
            .approvalsPerUserAllIntegrations, user.id, "Too many approvals for this user. Please try again later.", context: context,
            request: request, userID: user.id)
        let prompt = ApprovalPrompt(
            integrationID: integration.id, integrationName: integration.name, userEmail: user.email, title: checked.title, body: checked.body,
            context: checked.context)
        // The request's id and number exist before it does: its first answer is stored with it, sealed.
        let draft = broker.draft(ttl: checked.ttl.map(TimeInterval.init), numberMatching: checked.numberMatching)
        let record = try key.map { key in
            IdempotencyRecord(
                integrationID: integration.id, key: key, requestHash: requestHash, approvalID: draft.id,
                answer: try keys.seal(try APIJSON.encoder.encode(Self.answer(draft))), createdAt: draft.createdAt)
        }
        do {
            // A fraud report silences the user's phone resets; an integration's approvals still prompt.
            _ = try await broker.initiate(
                for: .user(id: user.id),
                action: ApprovalAction(rawValue: checked.action)!,
                newPasswordHash: nil,
                // Who asked, as the phone shows it: the end user the integration names, else the integration's own call.
                requester: RequesterInfo(
                    ip: checked.context["ip"] ?? context.clientIP, userAgent: checked.context["userAgent"] ?? request.userAgent),
                prompt: prompt,
                draft: draft,
                idempotency: record,
                // A code answers it at once: the phone is not prompted for it.
                prompting: checked.code == nil,
                context: request.auditContext(context),
                logger: context.logger)
            if let code = checked.code {
                return try await answer(draft.id, code: code, user: user.id, integration: integration, request: request, context: context)
            }
            if let wait = checked.wait {
                return try await waited(draft.id, seconds: wait, integration: integration, request: request, context: context)
            }
            return try JSONResponse.response(Self.answer(draft), status: .created)
        } catch is IdempotencyKeyTaken {
            // A concurrent create with the same key won: answer as it did.
            guard let key, let earlier = try await firstCreate(integration: integration, key: key, requestHash: requestHash) else {
                throw APIError.internalError
            }
            return try await answer(earlier, checked: checked, integration: integration, request: request, context: context)
        }
    }

    /// A repeated create's answer: the first one's, or, with `wait`, the end of the same
    /// approval (a RADIUS retransmission waits on the approval its first sending made).
    private func answer(
        _ earlier: IdempotencyRecord, checked: Checked, integration: Integration, request: Request, context: AppRequestContext
    ) async throws -> Response {
        if checked.answersWithEnd {
            // With a code, pending only while the first call checks it.
            let seconds = checked.wait ?? Self.codeCheckWaitSeconds
            return try await waited(earlier.approvalID, seconds: seconds, integration: integration, request: request, context: context)
        }
        return try JSONResponse.response(json: try keys.open(earlier.answer), status: .created)
    }

    /// How long a repeat of a create with a code waits for the first call's check.
    static let codeCheckWaitSeconds = 10

    /// A create with a code: the code is checked as `verify-code` checks it (counted per
    /// integration and user, and against the user's daily bound). Right: the approval is
    /// completed, 200. Wrong: it is cancelled (the phone's prompt goes away), 403.
    private func answer(
        _ id: String, code: AnswerCode, user userID: String, integration: Integration, request: Request, context: AppRequestContext
    ) async throws -> Response {
        do {
            _ = try await codes.answer(
                code, to: id, integrationID: integration.id, counted: (.verifyCodePerUser, "\(integration.id):\(userID)"), abuse: abuse,
                context: context, request: request)
        } catch let locked as CodeAnswers.Locked {
            _ = try? await broker.cancel(id, integrationID: integration.id, context: request.auditContext(context), logger: context.logger)
            throw APIError.codesLocked(until: locked.until)
        } catch let error as APIError where error.status == .tooManyRequests {
            _ = try? await broker.cancel(id, integrationID: integration.id, context: request.auditContext(context), logger: context.logger)
            throw error
        } catch is APIError, is BrokerError {
            // A wrong code (or the approval ended meanwhile): refused, whatever else answered it.
            let ended = try? await broker.cancel(id, integrationID: integration.id, context: request.auditContext(context), logger: context.logger)
            throw APIError.notApproved(ended?.state ?? .cancelled)
        }
        return try await waited(id, seconds: 1, integration: integration, request: request, context: context)
    }

    struct WaitedResponse: Encodable {
        var approvalId: String
        var status: ApprovalState
        /// `push`, `offline_code` or `bypass_code`.
        var via: String?
    }

    /// `"wait": N`: the create answers with the approval's end, within N seconds, as a status
    /// a caller that reads only HTTP statuses understands (FreeRADIUS's `rest` module: 2xx
    /// accepts, 401 and 403 reject). Approved is completed here (it is used once, by this
    /// answer) and answered 200 `completed`. Denied, expired, cancelled, or still pending when
    /// the wait ends is 403 `not_approved`; one still pending is cancelled first, so that the
    /// phone's prompt goes away and a late approval lets nothing in; one approved meanwhile is
    /// completed and answered 200. The create holds a slot of the caller's address meanwhile,
    /// as a long poll does. A caller that hangs up stops the wait: its approval is left as it
    /// is (to a repeat of the request, say by a restarted RADIUS server, or to its expiry), and
    /// nothing is completed for nobody.
    ///
    /// A call that finds the approval completed by another (a repeat) is answered 200 only within
    /// the completion window after it was completed: a retransmission, not a replay a day later.
    func waited(_ id: String, seconds: Int, integration: Integration, request: Request, context: AppRequestContext) async throws -> Response {
        let hangUp = ConnectionHangUp.current
        guard
            var approval = try await broker.waitForChange(
                of: id, integrationID: integration.id, timeout: .seconds(seconds), hangUp: hangUp)
        else {
            throw APIError.approvalNotFound
        }
        // Nobody reads this answer.
        if hangUp?.hasHungUp == true { throw APIError.notApproved(approval.state) }
        let audit = request.auditContext(context)
        if approval.state == .pending {
            if let cancelled = try? await broker.cancel(id, integrationID: integration.id, context: audit, logger: context.logger) {
                approval = cancelled
            } else if let now = try await broker.status(of: id, integrationID: integration.id) {
                // Answered between the wait's end and the cancel: approved is completed below.
                approval = now
            }
        }
        var completedHere = false
        if approval.state == .approved,
            let completed = try? await broker.complete(id, integrationID: integration.id, context: audit, logger: context.logger)
        {
            approval = completed
            completedHere = completed.state == .completed
        }
        // Another caller's transition may have come between: the state as it is now.
        if approval.state == .pending || approval.state == .approved,
            let now = try await broker.status(of: id, integrationID: integration.id)
        {
            approval = now
        }
        let answer = WaitedResponse(approvalId: approval.id, status: approval.state, via: approval.via?.rawValue)
        guard approval.state == .completed else { throw APIError.notApproved(approval.state) }
        guard completedHere || Date().timeIntervalSince(approval.updatedAt) <= approval.completionWindow else {
            throw APIError.notApproved(approval.state)
        }
        return try JSONResponse.response(answer, status: .ok)
    }

    /// The create's answer: the approval as it starts.
    static func answer(_ draft: ApprovalDraft) -> CreateResponse {
        CreateResponse(approvalId: draft.id, status: .pending, expiresAt: Timestamp.string(draft.expiresAt), numberCode: draft.numberCode)
    }

    /// The first create under `key`, or 409 when that key came with another request.
    private func firstCreate(integration: Integration, key: String, requestHash: String) async throws -> IdempotencyRecord? {
        guard
            let record = try await store.idempotencyRecord(
                integrationID: integration.id, key: key, since: Date().addingTimeInterval(-IdempotencyRecord.window))
        else { return nil }
        guard record.requestHash == requestHash else { throw APIError.idempotencyMismatch }
        return record
    }

    struct StatusResponse: ResponseEncodable {
        struct DeviceOut: Encodable {
            var id: String
            var name: String?
        }
        var approvalId: String
        var action: String
        var status: ApprovalState
        var createdAt: String
        var expiresAt: String
        // Always present: null until a device answered.
        @NullWhenAbsent var decidedAt: String?
        @NullWhenAbsent var device: DeviceOut?
        @NullWhenAbsent var deviceKeyBound: Bool?
        /// `push`, `offline_code` or `bypass_code` once answered.
        @NullWhenAbsent var via: String?
    }

    /// Approval `id` of `integration`, if its user is one the integration still reaches
    /// (a password given to its user, a grant revoked, `--prompt-all-users` turned off
    /// end its reach); else not found, as any other integration's approval is.
    func reachable(_ id: String, integration: Integration) async throws -> ApprovalRequest {
        try await Self.reachable(id, integration: integration, broker: broker, store: store)
    }

    static func reachable(
        _ id: String, integration: Integration, broker: ApprovalBroker, store: any IntegrationStore & UserAdministration
    ) async throws -> ApprovalRequest {
        guard let approval = try await broker.status(of: id, integrationID: integration.id),
            let userID = approval.recipient.accountID,
            try await store.integration(integration.id, reaches: userID, all: integration.promptsAllUsers)
        else { throw BrokerError.notFound }
        return approval
    }

    @Sendable func status(_ request: Request, context: AppRequestContext) async throws -> Response {
        let integration = try await authenticator.integration(for: request)
        let id = try context.parameters.require("approvalId")
        let wait = try request.longPollSeconds()
        _ = try await translating { try await reachable(id, integration: integration) }
        let poll = StatusLongPoll(broker: broker, slots: longPolls)
        // Capped per client address, as the phone reset's status is: an integration's
        // servers behind one address share its cap, whatever keys they hold.
        switch try await poll.poll(id, integrationID: integration.id, seconds: wait, context: context, answer: statusNow(of: id)) {
        case .parked: return LongPollHandOff.parkedResponse()
        case .waited(let found?): return try await Self.answer(found: found, store: store).response(from: request, context: context)
        // Gone while waiting: the plain status, as without a wait.
        case .waited(nil), .answerNow:
            return try await Self.statusResponse(
                of: id, integrationID: integration.id, broker: broker, store: store, request: request, context: context, after: nil)
        }
    }

    /// The status of approval `id` as it is when a long poll's wait is over.
    /// The caller is checked again, as on every call: a key rotated or an
    /// integration disabled while the poll waited is refused (401).
    func statusNow(of id: String) -> StatusResponder {
        // What it holds, each parked poll keeps: three references, not the controller.
        { [authenticator, broker, store] request, context, woken in
            let integration = try await authenticator.integration(for: request)
            guard (try? await Self.reachable(id, integration: integration, broker: broker, store: store)) != nil else {
                throw APIError.approvalNotFound
            }
            return try await Self.statusResponse(
                of: id, integrationID: integration.id, broker: broker, store: store, request: request, context: context, after: woken)
        }
    }

    /// The status answer of approval `id` as it is now: a plain poll's, and a
    /// parked poll's once its caller is checked again (`woken`: what ended its wait).
    static func statusResponse(
        of id: String, integrationID: String, broker: ApprovalBroker, store: any IntegrationStore & UserAdministration, request: Request,
        context: AppRequestContext, after woken: LongPollWake?
    ) async throws -> Response {
        try await answer(found: await broker.status(of: id, integrationID: integrationID, wokenBy: woken), store: store)
            .response(from: request, context: context)
    }

    /// The status answer for `approval`, or not found. A function of its own,
    /// so that the route's async frame, which a waiting long poll keeps, has no
    /// room for this work (as ``PhoneResetController/statusResponse(_:last:request:context:)``).
    @inline(never)
    private static func answer(found approval: ApprovalRequest?, store: any IntegrationStore & UserAdministration) async throws -> StatusResponse {
        guard let approval else { throw APIError.approvalNotFound }
        var device: StatusResponse.DeviceOut?
        if let deviceID = approval.respondingDeviceID {
            device = .init(id: deviceID, name: try await store.device(id: deviceID)?.name)
        }
        return StatusResponse(
            approvalId: approval.id, action: approval.action.rawValue, status: approval.state, createdAt: Timestamp.string(approval.createdAt),
            expiresAt: Timestamp.string(approval.expiresAt), decidedAt: Self.decidedAt(approval).map(Timestamp.string), device: device,
            deviceKeyBound: approval.respondingDeviceID == nil ? nil : (approval.deviceKeyBound ?? false), via: approval.via?.rawValue)
    }

    /// When a device answered (approved or denied), if one did.
    static func decidedAt(_ approval: ApprovalRequest) -> Date? {
        // Approving sets `completeBy` to the answer's time plus the window; later transitions keep it.
        if let completeBy = approval.completeBy { return completeBy.addingTimeInterval(-approval.completionWindow) }
        return approval.state == .denied ? approval.updatedAt : nil
    }

    struct Done: ResponseEncodable { var status: ApprovalState }

    @Sendable func complete(_ request: Request, context: AppRequestContext) async throws -> Done {
        let integration = try await authenticator.integration(for: request)
        let id = try context.parameters.require("approvalId")
        _ = try await request.readBody(context: context)
        let approval = try await translating {
            _ = try await reachable(id, integration: integration)
            return try await broker.complete(id, integrationID: integration.id, context: request.auditContext(context), logger: context.logger)
        }
        return Done(status: approval.state)
    }

    @Sendable func cancel(_ request: Request, context: AppRequestContext) async throws -> Done {
        let integration = try await authenticator.integration(for: request)
        let id = try context.parameters.require("approvalId")
        _ = try await request.readBody(context: context)
        let approval = try await translating {
            _ = try await reachable(id, integration: integration)
            return try await broker.cancel(id, integrationID: integration.id, context: request.auditContext(context), logger: context.logger)
        }
        return Done(status: approval.state)
    }

    struct CodeResponse: ResponseEncodable {
        var approvalId: String
        var status: ApprovalState
    }

    /// The relying service's user typed the code their trusted device shows offline (or a bypass code).
    @Sendable func verifyCode(_ request: Request, context: AppRequestContext) async throws -> CodeResponse {
        let integration = try await authenticator.integration(for: request)
        let id = try context.parameters.require("approvalId")
        let code = try Field.answerCode(try await request.decodeJSON(as: PhoneResetController.CodeBody.self, context: context).code)
        // Wrong codes are counted per (integration, user): the guesser is the end user the relying service
        // serves, not the service's own address, so one user's guesses never lock out its other users.
        let approval = try await translating { try await reachable(id, integration: integration) }
        do {
            let approved = try await translating {
                try await codes.answer(
                    code, to: id, integrationID: integration.id, counted: (.verifyCodePerUser, "\(integration.id):\(approval.subject)"),
                    abuse: abuse, context: context, request: request)
            }
            return CodeResponse(approvalId: approved.id, status: approved.state)
        } catch let locked as CodeAnswers.Locked {
            throw APIError.codesLocked(until: locked.until)
        }
    }

    /// The broker's "not found" is this API's "no such approval".
    private func translating(_ body: () async throws -> ApprovalRequest) async throws -> ApprovalRequest {
        do {
            return try await body()
        } catch BrokerError.notFound {
            throw APIError.approvalNotFound
        }
    }
}
