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
            and the number code asked for (end of input stops the simulator, answering nothing). With number \
            matching on, --approve-all answers one request with --number-code (a code belongs to one request) \
            and leaves alone every request it has no code for. With --offline-code the device shows its offline \
            code as each one starts, as a phone without network would, for typing where the requester waits \
            (verify-code); alone, it answers nothing.
            """
    )

    @Option(help: "The daemon's address, e.g. http://127.0.0.1:8080.") var url: String
    @Option(help: "The account to sign in as.") var email: String
    @Option(help: "The device name shown in `device list`.") var name = "countersign device simulate"
    @Flag(help: "Approve every pending request as it appears.") var approveAll = false
    @Flag(help: "Deny every pending request as it appears.") var denyAll = false
    @Flag(help: "With --deny-all: report each as fraud (the report is signed with the answer).") var reportFraud = false
    @Option(help: "With --approve-all: the number code to approve with.") var numberCode: String?
    @Flag(help: "Show the device's offline code (TOTP) as it changes; alone, answer nothing.") var offlineCode = false
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
        if offlineCode && device.offlineSecret == nil {
            throw ValidationError("the daemon gave this device no offline secret (it runs with --offline-codes off)")
        }
        let deadline = seconds.map { ContinuousClock.now + .seconds($0) }
        var seen: Set<String> = []
        var answered = 0
        var code = numberCode
        var shown: String?
        while count.map({ answered < $0 }) ?? true, deadline.map({ ContinuousClock.now < $0 }) ?? true {
            if offlineCode, let current = device.offlineCode(), current != shown {
                let left = Int(TOTP.period - Date().timeIntervalSince1970.truncatingRemainder(dividingBy: TOTP.period))
                // Written at once, also into a pipe: a code is of use only while it lasts.
                FileHandle.standardOutput.write(Data("offline code: \(current) (for \(left) s more)\n".utf8))
                shown = current
            }
            if offlineCode && !approveAll && !denyAll {
                try await Task.sleep(for: .milliseconds(500))
                continue
            }
            for item in try await device.pending() {
                guard let id = item["requestId"] as? String, !seen.contains(id) else { continue }
                seen.insert(id)
                let decision: ApprovalDecision
                let answerCode: String?
                switch decide(item, code: code) {
                case .answer(let chosen, let chosenCode):
                    (decision, answerCode) = (chosen, chosenCode)
                case .leave:
                    continue
                case .stop:
                    return
                }
                if answerCode != nil && answerCode == code { code = nil }
                let (status, body) = try await device.answer(
                    id, decision: decision, numberCode: answerCode, reportFraud: reportFraud && decision == .deny)
                let outcome = status == 200 ? (body["status"] as? String ?? "?") : "\(status) \(body["error"] as? String ?? "")"
                print("answered \(Self.reference(id)): \(decision.rawValue) → \(outcome)")
                answered += 1
                if let count, answered >= count { break }
            }
            try await Task.sleep(for: .milliseconds(500))
        }
    }

    enum Choice {
        case answer(ApprovalDecision, String?)
        /// Not this one.
        case leave
        /// Standard input ended: answer nothing more.
        case stop
    }

    /// What to do with a pending request; `code` is the number code still unused.
    func decide(_ item: [String: any Sendable], code: String?) -> Choice {
        let matching = item["numberMatching"] as? Bool ?? false
        let id = item["requestId"] as? String ?? "?"
        if denyAll { return .answer(.deny, nil) }
        if approveAll {
            guard !matching || code != nil else {
                print("left alone \(Self.reference(id)): number matching is on and there is no (unused) --number-code for it")
                return .leave
            }
            return .answer(.approve, matching ? code : nil)
        }
        print("")
        print("request \(Self.reference(id))")
        if let integration = (item["integration"] as? [String: any Sendable])?["name"] as? String { print("  from integration: \(integration)") }
        for field in ["title", "body", "action"] {
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
            guard let line = readLine(strippingNewline: true) else { return .stop }
            let typed = line.trimmingCharacters(in: .whitespaces)
            return typed.isEmpty ? .answer(.deny, nil) : .answer(.approve, typed)
        }
        print("Approve? [y/N] ", terminator: "")
        guard let line = readLine(strippingNewline: true) else { return .stop }
        return line.lowercased().hasPrefix("y") ? .answer(.approve, nil) : .answer(.deny, nil)
    }

    /// Requests are named by their log reference on screen: the id is the requester's credential.
    static func reference(_ id: String) -> String { ApprovalRequest.logReference(of: id) }
}
