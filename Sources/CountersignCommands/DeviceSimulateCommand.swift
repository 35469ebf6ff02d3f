import ArgumentParser
import CountersignCore
import CountersignDevice
import CountersignWire
import Foundation

/// `countersign device simulate`: the reference device, on the
/// `CountersignDevice` library. Signs in (or enrolls) once with a P-256 key
/// kept in its key file, then answers pending requests, signed: from the
/// terminal, or, for scripts, all alike.
struct DeviceSimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Act as a trusted phone with its own P-256 key: answer pending requests, signed.",
        discussion: """
            The device's key and credentials are kept in --key-file: the first run signs in (--email, the password \
            read from standard input) or enrolls (--enrollment-code from a relying service); later runs are the same \
            device. Without --approve-all or --deny-all, each request is shown and the number code asked for (end of \
            input stops the simulator, answering nothing). With number matching on, --approve-all takes each \
            request's number code from --number-codes (the requester's JSON answers: an initiate's or a \
            /v1/approvals create's) or --number-code (one request), and leaves alone every request it has no code \
            for. With --offline-code the device shows its offline code as each one starts, as a phone without \
            network would, for typing where the requester waits (verify-code); alone, it answers nothing.
            """
    )

    @Option(help: ArgumentHelp("The daemon's address: http://127.0.0.1:8080, say.", valueName: "url")) var url: String
    @Option(help: ArgumentHelp("Sign in as this account (the password is read from standard input).", valueName: "email")) var email: String?
    @Option(
        help: ArgumentHelp("Enroll with this one-time code from a relying service (POST /v1/users/{email}/enrollments) instead.", valueName: "code"))
    var enrollmentCode: String?
    @Option(help: ArgumentHelp("Where the device's key and credentials are kept, mode 0600.", valueName: "file"))
    var keyFile = "countersign-device.json"
    @Option(help: ArgumentHelp("The device name shown in `device list`.", valueName: "name")) var name = "countersign device simulate"
    @Flag(help: "Approve every pending request as it appears.") var approveAll = false
    @Flag(help: "Deny every pending request as it appears.") var denyAll = false
    @Flag(help: "With --deny-all: report each as fraud (the report is signed with the answer).") var reportFraud = false
    @Option(help: ArgumentHelp("With --approve-all: the number code to approve one request with.", valueName: "code")) var numberCode: String?
    @Option(help: ArgumentHelp("With --approve-all: a file of the requesters' JSON answers, whose number codes to approve with.", valueName: "file"))
    var numberCodes: String?
    @Flag(help: "Show the device's offline code (TOTP) as it changes; alone, answer nothing.") var offlineCode = false
    @Option(help: ArgumentHelp("Stop after this many answers. (default: run until interrupted)", valueName: "count")) var count: Int?
    @Option(help: ArgumentHelp("Stop after this many seconds. (default: run until interrupted)", valueName: "seconds")) var seconds: Int?

    func validate() throws {
        if approveAll && denyAll { throw ValidationError("--approve-all and --deny-all exclude each other") }
        if (numberCode != nil || numberCodes != nil) && !approveAll {
            throw ValidationError("--number-code and --number-codes go with --approve-all")
        }
        if email != nil && enrollmentCode != nil { throw ValidationError("--email and --enrollment-code exclude each other") }
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
        if let seconds, seconds < 1 { throw ValidationError("--seconds must be at least 1") }
    }

    func run() async throws {
        do {
            try await simulate()
        } catch let failure as Failure {
            // A failure of the run, not of its usage: one line, exit 1.
            Console.current.writeError("countersign device simulate: \(failure.message)\n")
            throw ExitCode.failure
        }
    }

    /// Why a run failed.
    struct Failure: Error {
        let message: String
    }

    func simulate() async throws {
        let device = CountersignDevice(baseURL: url, store: FileKeyStore(path: keyFile))
        let credentials = try await signedIn(device)
        print("device \(credentials.deviceID) of \(credentials.email), key-bound: \(credentials.keyBound) (kept in \(keyFile))")
        if offlineCode && credentials.offlineSecret == nil {
            throw CommandFailure("the daemon gave this device no offline secret (it runs with --offline-codes off)")
        }
        var codes = try numberCodes.map(Self.numberCodes(in:)) ?? [:]
        if let numberCodes, codes.isEmpty {
            print("warning: \(numberCodes) holds no requester's answer with a number code (one JSON object a line)")
        }
        var refused = 0
        let deadline = seconds.map { ContinuousClock.now + .seconds($0) }
        var seen: Set<String> = []
        var answered = 0
        var code = numberCode
        var shown: String?
        while count.map({ answered < $0 }) ?? true, deadline.map({ ContinuousClock.now < $0 }) ?? true {
            if offlineCode, let current = try await device.offlineCode(), current != shown {
                let left = Int(TOTP.period - Date().timeIntervalSince1970.truncatingRemainder(dividingBy: TOTP.period))
                // Written at once, also into a pipe: a code is of use only while it lasts.
                FileHandle.standardOutput.write(Data("offline code: \(current) (for \(left) s more)\n".utf8))
                shown = current
            }
            if offlineCode && !approveAll && !denyAll {
                try await Task.sleep(for: .milliseconds(500))
                continue
            }
            let pending: [PendingApproval]
            do {
                pending = try await device.pending()
            } catch DeviceError.refused(let status, _, _) where status == 401 {
                throw Failure(
                    message: "the daemon no longer knows device \(credentials.deviceID) (revoked, or a new database): "
                        + "delete \(keyFile) and sign in again")
            }
            for item in pending where !seen.contains(item.requestId) {
                seen.insert(item.requestId)
                let decision: Decision
                let answerCode: String?
                switch decide(item, code: codes[item.requestId] ?? code) {
                case .answer(let chosen, let chosenCode):
                    (decision, answerCode) = (chosen, chosenCode)
                case .leave:
                    continue
                case .stop:
                    return
                }
                if answerCode != nil && codes[item.requestId] == nil && answerCode == code { code = nil }
                codes[item.requestId] = nil
                let outcome: String
                do {
                    outcome = try await device.answer(
                        item.requestId, decision, numberCode: answerCode, reportFraud: reportFraud && decision == .deny)
                } catch let error as DeviceError {
                    outcome = error.description
                    refused += 1
                }
                print("answered \(Self.reference(item.requestId)): \(decision.rawValue) → \(outcome)")
                answered += 1
                if let count, answered >= count { break }
            }
            try await Task.sleep(for: .milliseconds(500))
        }
        if refused > 0 { throw Failure(message: "\(refused) answer(s) refused") }
        if let count, answered < count { throw Failure(message: "answered \(answered) of \(count) before --seconds ran out") }
    }

    /// The device's credentials: kept from an earlier run, or made now by signing in or enrolling.
    func signedIn(_ device: CountersignDevice) async throws -> DeviceCredentials {
        if let kept = try await device.credentials() {
            // The key file is one device: asked to be another, it says so rather than leave this one behind, trusted.
            if enrollmentCode != nil || email.map({ User.normalize(email: $0) != kept.email }) == true {
                throw Failure(
                    message: "\(keyFile) already holds device \(kept.deviceID) of \(kept.email): use another --key-file, "
                        + "or revoke that device (countersign device revoke \(kept.deviceID)) and delete the file")
            }
            return kept
        }
        do {
            if let enrollmentCode {
                return try await device.enroll(code: enrollmentCode, name: name, platform: "countersign-simulator")
            }
            guard let email else {
                throw CommandFailure("no device in \(keyFile) for \(url): give --email (and the password) or --enrollment-code")
            }
            guard let password = readSecretLine(prompt: "Password for \(email): "), !password.isEmpty else {
                throw CommandFailure("no password on standard input (give it as one line)")
            }
            return try await device.signIn(email: email, password: password, name: name, platform: "countersign-simulator")
        } catch let error as DeviceError {
            throw Failure(message: "sign-in refused: \(error)")
        }
    }

    /// Request id → number code, from the JSON objects a requester got back
    /// (`{"requestId", "numberCode"}` from an initiate, `{"approvalId", "numberCode"}`
    /// from a create), one per line or one alone.
    static func numberCodes(in path: String) throws -> [String: String] {
        guard let text = FileManager.default.contents(atPath: path).map({ String(decoding: $0, as: UTF8.self) }) else {
            throw CommandFailure("cannot read \(path)")
        }
        var codes: [String: String] = [:]
        for line in text.split(whereSeparator: \.isNewline) {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let id = (object["requestId"] ?? object["approvalId"]) as? String, let code = object["numberCode"] as? String
            else { continue }
            codes[id] = code
        }
        return codes
    }

    enum Choice {
        case answer(Decision, String?)
        /// Not this one.
        case leave
        /// Standard input ended: answer nothing more.
        case stop
    }

    /// What to do with a pending request; `code` is its number code, if known.
    func decide(_ item: PendingApproval, code: String?) -> Choice {
        if denyAll { return .answer(.deny, nil) }
        if approveAll {
            guard !item.numberMatching || code != nil else {
                print("left alone \(Self.reference(item.requestId)): number matching is on and there is no number code for it")
                return .leave
            }
            return .answer(.approve, item.numberMatching ? code : nil)
        }
        print("")
        print("request \(Self.reference(item.requestId))")
        if let integration = item.integration?.name { print("  from integration: \(integration)") }
        for (field, value) in [("title", item.title), ("body", item.body), ("action", item.action)] {
            if let value { print("  \(field): \(value)") }
        }
        for (key, value) in (item.context ?? [:]).sorted(by: { $0.key < $1.key }) { print("  \(key): \(value)") }
        print("  from: \(item.requester.ip) \(item.requester.userAgent ?? "")")
        if item.numberMatching {
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
