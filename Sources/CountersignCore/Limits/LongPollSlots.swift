import Synchronization

/// Bounds on long polls held at once: per client address and for the whole
/// node. A poll over either cap is answered at once with the current state
/// (clients fall back to plain polling); see `ApprovalBroker+LongPoll.swift`.
public final class LongPollSlots: Sendable {
    public let perAddress: Int
    public let total: Int
    private let state = Mutex<(byAddress: [String: Int], total: Int)>(([:], 0))

    public init(perAddress: Int = 1000, total: Int = 100_000) {
        precondition(perAddress > 0 && total > 0)
        self.perAddress = perAddress
        self.total = total
    }

    /// Takes a slot for `address`, or returns `false` when a cap is reached.
    public func acquire(_ address: String) -> Bool {
        state.withLock { state in
            let held = state.byAddress[address, default: 0]
            guard held < perAddress, state.total < total else { return false }
            state.byAddress[address] = held + 1
            state.total += 1
            return true
        }
    }

    public func release(_ address: String) {
        state.withLock { state in
            guard let held = state.byAddress[address], held > 0 else { return }
            state.byAddress[address] = held == 1 ? nil : held - 1
            state.total -= 1
        }
    }

    /// Long polls held now.
    public var held: Int { state.withLock { $0.total } }
}
