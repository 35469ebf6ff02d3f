import CountersignCore
import CountersignDeviceKeys
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// The approving device's side: list pending requests (pull mode), read one, answer one.
struct ApprovalsController: Sendable {
    let broker: ApprovalBroker
    let authenticator: DeviceAuthenticator
    let abuse: RateLimitGuard
    let audit: AuditLog
    let deviceKeys: DeviceKeyPolicy

    func addRoutes(to group: RouterGroup<AppRequestContext>) {
        group.get("approvals/pending", use: pending)
        group.get("approvals/{requestId}", use: one)
        group.post("approvals/{requestId}/respond", use: respond)
    }

    struct Item: Encodable {
        struct Requester: Encodable {
            var ip: String
            var userAgent: String?
        }
        var requestId: String
        var action: ApprovalAction
        var createdAt: String
        var expiresAt: String
        var numberMatching: Bool
        var requester: Requester
        var status: ApprovalState?
        /// What an integration asked to show; absent for a phone reset.
        var title: String?
        var body: String?
        var context: [String: String]?
        var integration: IntegrationName?

        struct IntegrationName: Encodable { var name: String }

        init(_ request: ApprovalRequest, withStatus: Bool) {
            requestId = request.id
            action = request.action
            createdAt = Timestamp.string(request.createdAt)
            expiresAt = Timestamp.string(request.expiresAt)
            numberMatching = request.numberMatching
            requester = Requester(ip: request.requester.ip, userAgent: request.requester.userAgent)
            status = withStatus ? request.state : nil
            if let prompt = request.prompt {
                title = prompt.title
                body = prompt.body
                context = prompt.context
                integration = IntegrationName(name: prompt.integrationName)
            }
        }
    }

    struct PendingResponse: ResponseEncodable { var approvals: [Item] }

    @Sendable func pending(_ request: Request, context: AppRequestContext) async throws -> PendingResponse {
        let device = try await authenticator.device(for: request)
        let requests = try await broker.pendingRequests(ofUser: device.userID)
        return PendingResponse(approvals: requests.map { Item($0, withStatus: false) })
    }

    struct OneResponse: ResponseEncodable {
        var item: Item
        func encode(to encoder: any Encoder) throws { try item.encode(to: encoder) }
    }

    @Sendable func one(_ request: Request, context: AppRequestContext) async throws -> OneResponse {
        let device = try await authenticator.device(for: request)
        let id = try context.parameters.require("requestId")
        guard let approval = try await broker.request(id, ofUser: device.userID) else { throw APIError.notFound }
        return OneResponse(item: Item(approval, withStatus: true))
    }

    struct RespondBody: Decodable {
        var decision: ApprovalDecision
        var numberCode: String?
        var reportFraud: Bool?
        /// ES256 JWS over the answer, from a key-bound device.
        var signature: Signature?

        /// What came as `signature`: absent, or present as anything. Whatever
        /// is wrong with it (not a string, `null`, empty, not a JWS) is a failed
        /// signature, answered 401 as a forged one is, never 400.
        enum Signature: Equatable {
            case text(String)
            case notText

            var text: String? {
                if case .text(let text) = self { return text }
                return nil
            }
        }

        enum CodingKeys: String, CodingKey { case decision, numberCode, reportFraud, signature }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            decision = try container.decode(ApprovalDecision.self, forKey: .decision)
            numberCode = try container.decodeIfPresent(String.self, forKey: .numberCode)
            reportFraud = try container.decodeIfPresent(Bool.self, forKey: .reportFraud)
            if container.contains(.signature) {
                signature = (try? container.decode(String.self, forKey: .signature)).map(Signature.text) ?? .notText
            }
        }
    }

    struct RespondResponse: ResponseEncodable {
        var requestId: String
        var status: ApprovalState
    }

    @Sendable func respond(_ request: Request, context: AppRequestContext) async throws -> RespondResponse {
        let device = try await authenticator.device(for: request)
        try await abuse.hit(.respondPerDevice, device.id, RateLimitGuard.Message.answers, context: context, request: request, userID: device.userID)
        let id = try context.parameters.require("requestId")
        let body = try await request.decodeJSON(as: RespondBody.self, context: context)
        let code = try body.numberCode.map { try Field.text($0, "numberCode", maxBytes: 8) }
        let reportFraud = body.reportFraud ?? false
        if reportFraud && body.decision != .deny {
            throw APIError.invalidRequest("The field `reportFraud` goes with the decision `deny` only.")
        }
        // Whatever is wrong with a signature (empty, not a JWS, too long) is one answer: 401, checked below.
        let signature = body.signature
        // A device an integration enrolled may not answer a password reset (a
        // relying service's key must not give itself a way into the account).
        // What a request is for never changes, so this needs no lock.
        if !device.mayApproveResets, let approval = try await broker.request(id, ofUser: device.userID), approval.action == .passwordReset {
            context.logger.notice("answer refused: device may not answer a password reset", metadata: ["device": "\(device.id)"])
            audit.record(
                AuditEvent(
                    kind: .signatureRefused, userID: device.userID, requestRef: ApprovalRequest.logReference(of: id),
                    context: request.auditContext(context, deviceID: device.id), detail: "enrolled device may not answer a password reset"))
            throw APIError.cannotApproveReset
        }
        var auditContext = request.auditContext(context, deviceID: device.id)
        var keyBound = false
        if deviceKeys != .off, device.publicKey == nil, signature != nil {
            // A signature nobody can check is a failed check: a keyless device that sends one is refused.
            context.logger.notice("answer refused: a signature from a device without a key", metadata: ["device": "\(device.id)"])
            audit.record(
                AuditEvent(
                    kind: .signatureRefused, userID: device.userID, requestRef: ApprovalRequest.logReference(of: id), context: auditContext,
                    detail: "answer signed by a device without a key"))
            throw APIError.invalidSignature
        }
        if deviceKeys != .off, let key = device.publicKey {
            // Checked before the broker sees the answer: a forged one changes nothing, not even to deny.
            // A fraud report is part of what is signed: it must be covered, and covered only when sent.
            let expected = AnswerSignature.Payload(
                requestId: id, decision: body.decision.rawValue, numberCode: code, iat: 0, deviceId: device.id, fraud: reportFraud ? true : nil)
            guard let signature = signature?.text, await AnswerSignature.verify(signature, key: key, expected: expected, now: Date()) else {
                context.logger.notice("answer refused: signature missing or not valid", metadata: ["device": "\(device.id)"])
                audit.record(
                    AuditEvent(
                        kind: .signatureRefused, userID: device.userID, requestRef: ApprovalRequest.logReference(of: id), context: auditContext,
                        detail: signature == nil ? "answer without a signature" : "answer signature not valid for this answer and key"))
                throw APIError.invalidSignature
            }
            auditContext.proof = signature
            auditContext.proofKey = key.json
            keyBound = true
        } else if deviceKeys == .required {
            throw APIError.keyRequired
        }
        let (approval, answer) = try await broker.respond(
            to: id,
            userID: device.userID,
            deviceID: device.id,
            decision: body.decision,
            numberCode: code,
            keyBound: keyBound,
            reportFraud: reportFraud,
            context: auditContext,
            logger: context.logger
        )
        context.logger.info(
            "approval answered",
            metadata: ["request": "\(approval.logReference)", "device": "\(device.id)", "status": "\(approval.state.rawValue)"]
        )
        if answer == .numberMismatch { throw APIError.numberMismatch }
        return RespondResponse(requestId: approval.id, status: approval.state)
    }
}
