import ArgumentParser
import CountersignCore
import Foundation

/// `countersign device simulate`: the reference device. Signs in with a fresh
/// P-256 key and answers pending requests, from the terminal or, for scripts,
/// all alike.
struct DeviceSimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Act as a trusted phone with its own P-256 key: answer pending requests, signed.",
        discussion: """
            The password is read from standard input. Without --approve-all or --deny-all, each request is shown \
            and the number code asked for. With number matching on, --approve-all answers with --number-code \
            and leaves alone a request it has no code for.
            """
    )

    @Option(help: "The daemon's address, e.g. http://127.0.0.1:8080.") var url: String
    @Option(help: "The account to sign in as.") var email: String
    @Option(help: "The device name shown in `device list`.") var name = "countersign device simulate"
    @Flag(help: "Approve every pending request as it appears.") var approveAll = false
    @Flag(help: "Deny every pending request as it appears.") var denyAll = false
    @Option(help: "With --approve-all: the number code to approve with.") var numberCode: String?
    @Option(help: "Stop after this many answers (default: run until interrupted).") var count: Int?
    @Option(help: "Stop after this many seconds (default: run until interrupted).") var seconds: Int?

    func validate() throws {
        if approveAll && denyAll { throw ValidationError("--approve-all and --deny-all exclude each other") }
        if numberCode != nil && !approveAll { throw ValidationError("--number-code goes with --approve-all") }
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
        if let seconds, seconds < 1 { throw ValidationError("--seconds must be at least 1") }
    }

    func run() async throws {
        guard let password = readSecretLine(prompt: "Password for \(email): "), !password.isEmpty else {
            throw ValidationError("no password on standard input (give it as one line)")
        }
        var base = url
        while base.hasSuffix("/") { base.removeLast() }
        let address = base
        let device = try await SimulatedDevice.signIn(email: email, password: password, name: name) { method, path, body, apiKey in
            try await jsonCall(base: address, method, path, body, apiKey: apiKey)
        }
        print("signed in as device \(device.deviceID) with a P-256 key (key-bound: \(device.keyBound))")
        let deadline = seconds.map { ContinuousClock.now + .seconds($0) }
        var seen: Set<String> = []
        var answered = 0
        while count.map({ answered < $0 }) ?? true, deadline.map({ ContinuousClock.now < $0 }) ?? true {
            for item in try await device.pending() {
                guard let id = item["requestId"] as? String, !seen.contains(id) else { continue }
                seen.insert(id)
                guard let (decision, code) = decide(item) else { continue }
                let (status, body) = try await device.answer(id, decision: decision, numberCode: code)
                let outcome = status == 200 ? (body["status"] as? String ?? "?") : "\(status) \(body["error"] as? String ?? "")"
                print("answered \(Self.reference(id)): \(decision.rawValue) → \(outcome)")
                answered += 1
                if let count, answered >= count { break }
            }
            try await Task.sleep(for: .milliseconds(500))
        }
    }

    /// What to answer, or `nil` to leave the request alone.
    func decide(_ item: [String: any Sendable]) -> (ApprovalDecision, String?)? {
        let matching = item["numberMatching"] as? Bool ?? false
        let id = item["requestId"] as? String ?? "?"
        if denyAll { return (.deny, nil) }
        if approveAll {
            guard !matching || numberCode != nil else {
                print("left alone \(Self.reference(id)): number matching is on and no --number-code was given")
                return nil
            }
            return (.approve, matching ? numberCode : nil)
        }
        print("")
        print("request \(Self.reference(id))")
        for field in ["title", "body", "action", "integration"] {
            if let value = item[field] as? String { print("  \(field): \(value)") }
        }
        if let context = item["context"] as? [String: any Sendable] {
            for (key, value) in context.sorted(by: { $0.key < $1.key }) { print("  \(key): \(value)") }
        }
        if let requester = item["requester"] as? [String: any Sendable] {
            print("  from: \(requester["ip"] as? String ?? "?") \(requester["userAgent"] as? String ?? "")")
        }
        if matching {
            print("Type the number shown on the requesting screen to approve, or press Enter to deny: ", terminator: "")
            guard let typed = readLine(strippingNewline: true)?.trimmingCharacters(in: .whitespaces), !typed.isEmpty else {
                return (.deny, nil)
            }
            return (.approve, typed)
        }
        print("Approve? [y/N] ", terminator: "")
        return readLine(strippingNewline: true)?.lowercased().hasPrefix("y") == true ? (.approve, nil) : (.deny, nil)
    }

    /// Requests are named by their log reference on screen: the id is the requester's credential.
    static func reference(_ id: String) -> String { ApprovalRequest.logReference(of: id) }
}
