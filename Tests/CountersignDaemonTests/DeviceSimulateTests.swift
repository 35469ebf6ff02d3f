import CountersignCore
import Foundation
import NIOHTTP1
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `countersign device simulate` (the reference device) and `audit --proof`,
/// with the real binary against a real daemon.
@Suite struct DeviceSimulateTests {
    static func run(_ arguments: [String], input: String) async throws -> (status: Int32, output: String) {
        try await onOwnThread { try runBlocking(arguments, input: input) }
    }

    /// With `umask`, the binary runs under that umask.
    static func runBlocking(_ arguments: [String], input: String, umask: String? = nil) throws -> (status: Int32, output: String) {
        guard let umask else { return try runToEnd(DaemonProcessTests.binary.path, arguments, input: input) }
        return try runToEnd(
            "/bin/sh", ["-c", "umask \(umask) && exec \"$0\" \"$@\"", DaemonProcessTests.binary.path] + arguments, input: input)
    }

    @Test func theSimulatedDeviceApprovesWithItsKeyAndTheAuditTrailProvesIt() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            // setup: a user, and a daemon that requires signed answers.
            let database = folder.appendingPathComponent("countersign.sqlite").path
            let email = "ana@example.com"
            #expect(try await Self.run(["user", "add", email, "--database", database, "--bcrypt-cost", "4"], input: "correct horse\n").status == 0)
            let daemon = try await MailDeliveryProcessTests.startDaemon(
                ["--database", database, "--device-keys", "required"], log: folder.appendingPathComponent("daemon.log"))
            let base = daemon.base
            defer { daemon.stop() }
            let (_, initiated) = try await DaemonProcessTests.http(
                .POST, "\(base)/api/mobile/auth/reset/phone/initiate", json: #"{"email":"\#(email)","newPassword":"staple orbit lantern"}"#)
            let id = try #require(initiated["requestId"] as? String)
            let code = try #require(initiated["numberCode"] as? String)

            // act: without a code it leaves the request alone; with the code it approves.
            // The second run is the same device: its key file keeps the identity (no password asked again).
            let keyFile = folder.appendingPathComponent("device.json").path
            let (skipped, skippedOutput) = try await Self.run(
                ["device", "simulate", "--url", base, "--email", email, "--key-file", keyFile, "--approve-all", "--seconds", "2"],
                input: "correct horse\n")
            let (status, output) = try await Self.run(
                [
                    "device", "simulate", "--url", base, "--key-file", keyFile, "--approve-all", "--number-code", code, "--count", "1",
                    "--seconds", "20",
                ],
                input: "")
            let firstDevice = skippedOutput.firstMatch(of: /device (\S+) of/)?.1
            #expect(firstDevice != nil && firstDevice == output.firstMatch(of: /device (\S+) of/)?.1, "\(skippedOutput)\n\(output)")
            #expect(try TrustProcessTests.mode(keyFile) == 0o600)

            // check
            #expect(skipped == 0, "\(skippedOutput)")
            #expect(skippedOutput.contains("left alone"))
            #expect(status == 0, "\(output)")
            #expect(output.contains("key-bound: true"))
            #expect(output.contains("approve → approved"))
            #expect(!output.contains(id), "the request id is a credential: the simulator shows its reference only")
            let (_, state) = try await DaemonProcessTests.http(.GET, "\(base)/api/mobile/auth/reset/phone/status/\(id)")
            #expect(state["status"] as? String == "approved")

            // The trail keeps the signed answer; audit --proof re-verifies it.
            var reference: String?
            for _ in 0..<50 where reference == nil {
                let (_, lines) = try await Self.run(["audit", "--database", database, "--kind", "approved", "--json"], input: "")
                reference =
                    lines.split(separator: "\n").compactMap { line in
                        (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])?["request"]
                    }.first
                if reference == nil { try await Task.sleep(for: .milliseconds(100)) }
            }
            let ref = try #require(reference)
            let (proofStatus, proof) = try await Self.run(["audit", "--database", database, "--request", ref, "--proof"], input: "")
            #expect(proofStatus == 0, "\(proof)")
            #expect(proof.contains("jws: eyJ"))
            #expect(proof.contains("✓ ES256 signature valid; approve by device"))
        }
    }

    /// One request id in 64 begins with `-`: `audit --request` still takes it as
    /// the value, not as an option of its own.
    @Test func auditTakesARequestIDThatBeginsWithADash() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let database = folder.appendingPathComponent("countersign.sqlite").path
            #expect(
                try await Self.run(["user", "add", "ana@example.com", "--database", database, "--bcrypt-cost", "4"], input: "correct horse\n").status
                    == 0)
            let id = "-" + String(repeating: "A", count: 21)
            let (status, output) = try await Self.run(["audit", "--request", id, "--database", database], input: "")
            #expect(status == 0, "\(output)")
            #expect(output.contains("no audit events for request \(ApprovalRequest.logReference(of: id))"), "\(output)")
            // An option where the id was left out is still refused, not looked up.
            let (missing, refusal) = try await Self.run(["audit", "--request", "--proof", "--database", database], input: "")
            #expect(missing == 64, "\(refusal)")
            #expect(refusal.contains("--request needs a request id or reference"), "\(refusal)")
        }
    }
}
