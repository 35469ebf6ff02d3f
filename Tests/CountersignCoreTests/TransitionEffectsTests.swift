import Foundation
import Testing

@testable import CountersignCore

/// What a committed transition owes beyond its row, decided as a value.
@Suite struct TransitionEffectsTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func request(prompt: ApprovalPrompt? = nil, action: ApprovalAction = .passwordReset) -> ApprovalRequest {
        ApprovalRequest(
            id: "req", userID: "u1", subject: "u1", action: action, state: .pending, createdAt: now, expiresAt: now + 60, completionWindow: 120,
            updatedAt: now, numberCode: nil, newPasswordHash: "hash", requester: RequesterInfo(ip: "203.0.113.7", userAgent: nil), prompt: prompt)
    }

    @Test func anAnswerOnAPhoneResetIsAuditedAndTakesThePromptOffTheDevices() {
        var machine = ApprovalStateMachine(Self.request())
        guard case .persist(let approval) = machine.respond(.approve, numberCode: nil, deviceID: "d1", at: Self.now) else {
            Issue.record("refused")
            return
        }
        let effects = TransitionEffects(of: approval, on: machine.request, context: .system, auditedWithIt: false)
        #expect(effects.audit.map(\.kind) == [.approved])
        #expect(effects.push == .resolved(requestID: "req", userID: "u1", status: .approved))
        #expect(!effects.ringsOutbox)
        // A signed answer's event was written with its transition: not a second time.
        #expect(TransitionEffects(of: approval, on: machine.request, context: .system, auditedWithIt: true).audit.isEmpty)

        // Completing sets the password: audited as such; nothing left on the devices to take off.
        guard case .persist(let completion) = machine.complete(at: Self.now + 1) else {
            Issue.record("refused")
            return
        }
        let completed = TransitionEffects(of: completion, on: machine.request, context: .system, auditedWithIt: false)
        #expect(completed.audit.map(\.kind) == [.completed, .passwordChanged])
        #expect(completed.push == nil)
    }

    @Test func anIntegrationsApprovalRingsTheOutboxAndNamesHowItWasAnswered() {
        let prompt = ApprovalPrompt(integrationID: "i", integrationName: "Acme", userEmail: "a@example.com", title: "t", body: "", context: [:])
        var machine = ApprovalStateMachine(Self.request(prompt: prompt, action: ApprovalAction(rawValue: "login")!))
        guard case .persist(let approval) = machine.approveByCode(via: .offlineCode, deviceID: "d1", at: Self.now) else {
            Issue.record("refused")
            return
        }
        let effects = TransitionEffects(of: approval, on: machine.request, context: .system, auditedWithIt: false)
        #expect(effects.ringsOutbox)
        #expect(effects.audit.first?.detail == "integration Acme; offline code; the answer carries no signature")
        #expect(effects.audit.contains { $0.kind == .passwordChanged } == false, "an approval never sets a password")
    }
}
