import CountersignCore
import Foundation
import Testing

@Suite struct ApprovalStateMachineTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    static func request(_ state: ApprovalState = .pending, code: String? = "47", completeBy: Date? = nil) -> ApprovalRequest {
        ApprovalRequest(
            id: "r1", userID: "u1", subject: "u1", action: .passwordReset, state: state,
            createdAt: t0, expiresAt: t0.addingTimeInterval(60), completionWindow: 120,
            completeBy: completeBy ?? (state == .approved ? t0.addingTimeInterval(150) : nil),
            updatedAt: t0, numberCode: code.map(NumberCode.seal), newPasswordHash: "$2b$hash",
            requester: RequesterInfo(ip: "203.0.113.7", userAgent: "test"))
    }

    // MARK: allowed transitions

    @Test func approvingWithTheRightCodeApprovesAndOpensTheCompletionWindow() {
        var machine = ApprovalStateMachine(Self.request())
        let at = Self.t0.addingTimeInterval(10)
        let action = machine.respond(.approve, numberCode: "47", deviceID: "d1", at: at)
        #expect(action == .persist(Transition(from: .pending, to: .approved, cause: .approvedByDevice, at: at)))
        #expect(machine.request.state == .approved)
        #expect(machine.request.completeBy == at.addingTimeInterval(120))
        #expect(machine.request.respondingDeviceID == "d1")
        #expect(machine.request.newPasswordHash == "$2b$hash")
    }

    @Test func approvingWithoutNumberMatchingNeedsNoCode() {
        var machine = ApprovalStateMachine(Self.request(code: nil))
        let action = machine.respond(.approve, numberCode: nil, deviceID: "d1", at: Self.t0)
        #expect(action == .persist(Transition(from: .pending, to: .approved, cause: .approvedByDevice, at: Self.t0)))
    }

    @Test func denyingDeniesAndDropsTheHeldPassword() {
        var machine = ApprovalStateMachine(Self.request())
        let action = machine.respond(.deny, numberCode: nil, deviceID: "d1", at: Self.t0)
        #expect(action == .persist(Transition(from: .pending, to: .denied, cause: .deniedByDevice, at: Self.t0)))
        #expect(machine.request.newPasswordHash == nil)
    }

    @Test func aWrongCodeDenies() {
        var machine = ApprovalStateMachine(Self.request())
        let action = machine.respond(.approve, numberCode: "48", deviceID: "d1", at: Self.t0)
        #expect(action == .persist(Transition(from: .pending, to: .denied, cause: .numberMismatch, at: Self.t0)))
        #expect(machine.request.state == .denied)
    }

    @Test func completingAnApprovedRequestCompletes() {
        var machine = ApprovalStateMachine(Self.request(.approved))
        let at = Self.t0.addingTimeInterval(100)
        #expect(machine.complete(at: at) == .persist(Transition(from: .approved, to: .completed, cause: .completedByRequester, at: at)))
        #expect(machine.request.state == .completed)
    }

    @Test func cancellingAPendingRequestCancels() {
        var machine = ApprovalStateMachine(Self.request())
        #expect(machine.cancel(at: Self.t0) == .persist(Transition(from: .pending, to: .cancelled, cause: .cancelledByRequester, at: Self.t0)))
    }

    @Test func aNewerRequestSupersedesAPendingOne() {
        var machine = ApprovalStateMachine(Self.request())
        #expect(machine.supersede(at: Self.t0) == Transition(from: .pending, to: .cancelled, cause: .supersededByNewerRequest, at: Self.t0))
        var approved = ApprovalStateMachine(Self.request(.approved))
        #expect(approved.supersede(at: Self.t0) == nil)
    }

    @Test func pendingExpiresAtItsDeadlineAndNotBefore() {
        var machine = ApprovalStateMachine(Self.request())
        #expect(machine.expireIfDue(at: Self.t0.addingTimeInterval(59.9)) == nil)
        #expect(machine.state(at: Self.t0.addingTimeInterval(59.9)) == .pending)
        let deadline = Self.t0.addingTimeInterval(60)
        #expect(machine.state(at: deadline) == .expired)
        #expect(machine.expireIfDue(at: deadline) == Transition(from: .pending, to: .expired, cause: .timedOut, at: deadline))
        #expect(machine.request.newPasswordHash == nil)
    }

    @Test func approvedExpiresWhenTheCompletionWindowPasses() {
        var machine = ApprovalStateMachine(Self.request(.approved))
        let deadline = Self.t0.addingTimeInterval(150)
        #expect(machine.state(at: deadline.addingTimeInterval(-1)) == .approved)
        #expect(machine.expireIfDue(at: deadline) == Transition(from: .approved, to: .expired, cause: .timedOut, at: deadline))
    }

    // MARK: refused transitions

    @Test func approvingWithoutTheCodeIsRefusedAndStaysPending() {
        var machine = ApprovalStateMachine(Self.request())
        #expect(machine.respond(.approve, numberCode: nil, deviceID: "d1", at: Self.t0) == .refuse(.numberCodeRequired))
        #expect(machine.request.state == .pending)
    }

    @Test(arguments: [ApprovalState.approved, .denied, .cancelled, .completed])
    func answeringANonPendingRequestConflicts(state: ApprovalState) {
        var machine = ApprovalStateMachine(Self.request(state))
        #expect(machine.respond(.approve, numberCode: "47", deviceID: "d1", at: Self.t0) == .refuse(.conflict(state)))
        #expect(machine.respond(.deny, numberCode: nil, deviceID: "d1", at: Self.t0) == .refuse(.conflict(state)))
        #expect(machine.cancel(at: Self.t0) == .refuse(.conflict(state)))
        #expect(machine.request.state == state)
    }

    @Test(arguments: [ApprovalState.pending, .denied, .cancelled, .completed])
    func completingAnythingButApprovedConflicts(state: ApprovalState) {
        var machine = ApprovalStateMachine(Self.request(state))
        #expect(machine.complete(at: Self.t0) == .refuse(.conflict(state)))
    }

    @Test func everyOperationOnAnExpiredRequestIsRefusedAsExpired() {
        let late = Self.t0.addingTimeInterval(61)
        // A deadline that passed unrecorded: the refusal carries the time-out to write first.
        let timeOut = Transition(from: .pending, to: .expired, cause: .timedOut, at: late)
        var approving = ApprovalStateMachine(Self.request())
        #expect(approving.respond(.approve, numberCode: "47", deviceID: "d1", at: late) == .expire(timeOut))
        #expect(approving.request.state == .expired)
        #expect(approving.request.newPasswordHash == nil)
        // Once the time-out is in the request, a plain refusal.
        #expect(approving.respond(.approve, numberCode: "47", deviceID: "d1", at: late) == .refuse(.expired))
        var denying = ApprovalStateMachine(Self.request())
        #expect(denying.respond(.deny, numberCode: nil, deviceID: "d1", at: late) == .expire(timeOut))
        var cancelling = ApprovalStateMachine(Self.request())
        #expect(cancelling.cancel(at: late) == .expire(timeOut))
        var completing = ApprovalStateMachine(Self.request())
        #expect(completing.complete(at: late) == .expire(timeOut))
        var superseding = ApprovalStateMachine(Self.request())
        #expect(superseding.supersede(at: late) == nil)
        var approved = ApprovalStateMachine(Self.request(.approved))
        let completionTimeOut = Transition(from: .approved, to: .expired, cause: .timedOut, at: Self.t0.addingTimeInterval(150))
        #expect(approved.complete(at: Self.t0.addingTimeInterval(150)) == .expire(completionTimeOut))
        var stored = ApprovalStateMachine(Self.request(.expired))
        #expect(stored.complete(at: Self.t0) == .refuse(.expired))
        #expect(stored.expireIfDue(at: late) == nil)
    }

    @Test(arguments: [ApprovalState.denied, .expired, .cancelled, .completed])
    func terminalStatesNeverExpireAgain(state: ApprovalState) {
        var machine = ApprovalStateMachine(Self.request(state))
        #expect(machine.expireIfDue(at: Self.t0.addingTimeInterval(10_000)) == nil)
        #expect(machine.state(at: Self.t0.addingTimeInterval(10_000)) == state)
    }
}
