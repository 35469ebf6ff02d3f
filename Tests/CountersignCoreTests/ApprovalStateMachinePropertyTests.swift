import CountersignCore
import Foundation
import PropertyBased
import Testing

/// Random event sequences against the machine: whatever happens, in whatever
/// order and at whatever time, it moves only along the table.
@Suite struct ApprovalStateMachinePropertyTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    static let allowed: Set<[ApprovalState]> = [
        [.pending, .approved], [.pending, .denied], [.pending, .expired], [.pending, .cancelled],
        [.approved, .completed], [.approved, .expired], [.approved, .cancelled],
    ]

    /// One step: an event, after some seconds (a request lives 60 s, its completion window 120 s).
    enum Event: CaseIterable {
        case approveRightCode, approveWrongCode, approveNoCode, deny, complete, cancel, supersede, sweep, passwordChanged
    }

    static func step(_ number: Int) -> (event: Event, after: TimeInterval) {
        (Event.allCases[number % Event.allCases.count], TimeInterval(number / Event.allCases.count))
    }

    @Test func randomEventSequencesStayInsideTheTable() async {
        await propertyCheck(count: 1000, input: Gen.int(in: 0...(Event.allCases.count * 45)).array(of: 1...30)) { steps in
            let request = ApprovalRequest(
                id: "r1", userID: "u1", subject: "u1", action: .passwordReset, state: .pending,
                createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(60), completionWindow: 120,
                updatedAt: Self.t0, numberCode: NumberCode.seal("47"), newPasswordHash: "$2b$hash",
                requester: RequesterInfo(ip: "203.0.113.7", userAgent: nil))
            var machine = ApprovalStateMachine(request)
            var now = Self.t0
            var terminalSeen = false
            for number in steps {
                let (event, after) = Self.step(number)
                now += after
                let before = machine.request
                let transition: Transition?
                switch event {
                case .approveRightCode: transition = Self.transition(machine.respond(.approve, numberCode: "47", deviceID: "d", at: now))
                case .approveWrongCode: transition = Self.transition(machine.respond(.approve, numberCode: "12", deviceID: "d", at: now))
                case .approveNoCode: transition = Self.transition(machine.respond(.approve, numberCode: nil, deviceID: "d", at: now))
                case .deny: transition = Self.transition(machine.respond(.deny, numberCode: nil, deviceID: "d", at: now))
                case .complete: transition = Self.transition(machine.complete(at: now))
                case .cancel: transition = Self.transition(machine.cancel(at: now))
                case .supersede: transition = machine.supersede(at: now)
                case .sweep: transition = machine.expireIfDue(at: now)
                case .passwordChanged: transition = machine.cancelForPasswordChange(at: now)
                }
                if let transition {
                    // Only the table's moves, from the state the request held, recorded in it.
                    #expect(Self.allowed.contains([transition.from, transition.to]), "\(transition.from) → \(transition.to) after \(event)")
                    #expect(transition.from == before.state)
                    #expect(machine.request.state == transition.to)
                    #expect(machine.request.version == before.version + 1)
                    // Never a second terminal state.
                    #expect(!terminalSeen, "a transition after a terminal state: \(transition.from) → \(transition.to)")
                    // A time-out only once the deadline passed; anything else only before it.
                    if let deadline = before.deadline {
                        #expect((transition.cause == .timedOut) == (now >= deadline))
                    }
                    // Only a password changed another way ends an approved request but its completion and time-out.
                    if transition.from == .approved && transition.to == .cancelled { #expect(event == .passwordChanged) }
                } else {
                    #expect(machine.request == before, "a refusal changed the request")
                }
                terminalSeen = !machine.request.state.isLive
                // A reader never sees pending past the deadline.
                if now >= Self.t0.addingTimeInterval(60) { #expect(machine.state(at: now) != .pending) }
                if !machine.request.state.isLive { #expect(machine.request.newPasswordHash == nil) }
            }
        }
    }

    static func transition(_ action: MachineVerdict) -> Transition? {
        switch action {
        case .persist(let transition), .expire(let transition): transition
        case .refuse: nil
        }
    }
}
