import Foundation
import NIOHTTP1
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Creates that share a transaction are answered only once it is durable:
/// kill -9 in the middle of a stream of them loses none that was answered.
@Suite struct GroupCommitProcessTests {
    @Test(.timeLimit(.minutes(5))) func noAnsweredCreateIsLostToKillDashNineUnderLoad() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let database = folder.appendingPathComponent("countersign.sqlite").path
            let log = folder.appendingPathComponent("daemon.log")
            let raised = [
                "--database", database, "--request-ttl", "3600", "--rate-limit", "resetInitiatePerIP=1000000/60",
                "--rate-limit", "statusPollsPerIP=1000000/60",
            ]
            let daemon = try await MailDeliveryProcessTests.startDaemon(raised, log: log)
            defer { daemon.stop() }
            let port = daemon.port

            // 16 requesters create without pause; the daemon is killed once 200 answers have come back.
            final class Answered: Sendable { let ids = Mutex<[String]>([]) }
            let answered = Answered()
            let pid = daemon.processIdentifier
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<16 {
                    group.addTask {
                        var index = 0
                        while true {
                            index += 1
                            let body = #"{"email":"load-\#(worker)-\#(index)@example.com","newPassword":"staple orbit lantern"}"#
                            guard
                                let (status, answer) = try? await DaemonProcessTests.http(
                                    .POST, "http://127.0.0.1:\(port)/api/mobile/auth/reset/phone/initiate", json: body, timeout: 10),
                                status == 200, let id = answer["requestId"] as? String
                            else { return }  // the daemon is gone
                            let count = answered.ids.withLock {
                                $0.append(id)
                                return $0.count
                            }
                            if count == 200 { kill(pid, SIGKILL) }
                        }
                    }
                }
            }
            try await daemon.exited()
            #expect(daemon.terminationReason == .uncaughtSignal)
            let acknowledged = answered.ids.withLock { $0 }
            #expect(acknowledged.count >= 200)

            // Restarted on the same file: every answered request is there, still pending.
            let restarted = try await MailDeliveryProcessTests.startDaemon(raised, log: log)
            defer { restarted.stop() }
            let again = restarted.port
            var missing: [String] = []
            for id in acknowledged {
                let (status, answer) = try await DaemonProcessTests.http(.GET, "http://127.0.0.1:\(again)/api/mobile/auth/reset/phone/status/\(id)")
                if status != 200 || answer["status"] as? String != "pending" { missing.append(id) }
            }
            #expect(missing.isEmpty, "\(missing.count) of \(acknowledged.count) answered creates were lost")
        }
    }

    /// http-api.md: every transition is durable before its answer. Sixteen
    /// devices approve and their requesters complete without pause; after every
    /// 200 answered transitions the daemon is killed and started again, three
    /// times, and in the end each answered transition holds.
    @Test(.timeLimit(.minutes(5))) func noAnsweredTransitionIsLostToKillDashNineUnderLoad() async throws {
        try await MailDeliveryProcessTests.withFolder { folder in
            let database = folder.appendingPathComponent("countersign.sqlite").path
            let log = folder.appendingPathComponent("daemon.log")
            let raised = [
                // Approvals neither expire nor lapse while a busy machine runs the rounds.
                "--database", database, "--request-ttl", "3600", "--completion-window", "3600",
                "--rate-limit", "approvalsPerIntegration=1000000/1", "--rate-limit", "approvalsPerUser=1000000/60",
                "--rate-limit", "respondPerDevice=1000000/60", "--rate-limit", "statusPollsPerIP=1000000/1",
            ]
            let added = try await DaemonProcessTests.command(["integration", "add", "Load", "--database", database])
            let apiKey = try #require(
                added.output.split(separator: "\n").first { $0.hasPrefix("API key:") }.map { $0.dropFirst(8).trimmingCharacters(in: .whitespaces) },
                "\(added.output)")
            let auth = [("Authorization", "Bearer \(apiKey)")]
            let daemon = try await MailDeliveryProcessTests.startDaemon(raised, log: log)
            defer { daemon.stop() }
            let port = daemon.port
            let base = daemon.base
            func call(
                _ method: HTTPMethod, _ path: String, _ json: String? = nil, _ headers: [(String, String)]
            ) async throws -> (Int, [String: any Sendable]) {
                // A hang detector: on a slow machine under the whole suite a setup call has taken more than 10 s.
                try await DaemonProcessTests.http(method, base + path, json: json, headers: headers, timeout: 120)
            }
            // One user and one enrolled phone per worker.
            var devices: [[(String, String)]] = []
            for worker in 0..<16 {
                let email = "load-\(worker)@example.com"
                #expect(try await call(.POST, "/v1/users", #"{"email":"\#(email)"}"#, auth).0 == 201)
                let code = try #require(try await call(.POST, "/v1/users/\(email)/enrollments", nil, auth).1["enrollmentCode"] as? String)
                let (enrolled, login) = try await call(
                    .POST, "/api/mobile/auth/enroll", #"{"enrollmentCode":"\#(code)","deviceName":"phone","platform":"android"}"#, [])
                #expect(enrolled == 200)
                devices.append([("X-API-Key", try #require(login["apiKey"] as? String))])
            }

            // Three rounds on the same file: each kills the daemon after 200 more answers and starts it again.
            final class Answered: Sendable {
                let states = Mutex<[(id: String, state: String)]>([])
                let killed = Mutex(0)
            }
            let answered = Answered()
            let phones = devices
            var running = daemon
            var runningPort = port
            for round in 1...3 {
                let pid = running.processIdentifier
                let base = "http://127.0.0.1:\(runningPort)"
                await withTaskGroup(of: Void.self) { group in
                    for worker in 0..<16 {
                        group.addTask {
                            func call(
                                _ method: HTTPMethod, _ path: String, _ json: String?, _ headers: [(String, String)]
                            ) async -> (Int, [String: any Sendable])? {
                                try? await DaemonProcessTests.http(method, base + path, json: json, headers: headers, timeout: 5)
                            }
                            func acknowledged(_ id: String, _ state: String) {
                                let count = answered.states.withLock {
                                    $0.append((id, state))
                                    return $0.count
                                }
                                if count == 200 * round {
                                    answered.killed.withLock { $0 = round }
                                    kill(pid, SIGKILL)
                                }
                            }
                            while answered.killed.withLock({ $0 }) < round {
                                let create = #"{"user":"load-\#(worker)@example.com","action":"sign_in","title":"Load"}"#
                                guard let (created, approval) = await call(.POST, "/v1/approvals", create, auth), created == 201,
                                    let id = approval["approvalId"] as? String, let number = approval["numberCode"] as? String,
                                    let (approved, _) = await call(
                                        .POST, "/api/mobile/approvals/\(id)/respond", #"{"decision":"approve","numberCode":"\#(number)"}"#,
                                        phones[worker]),
                                    approved == 200
                                else { continue }  // killed meanwhile (the loop ends), or slow: start over
                                acknowledged(id, "approved")
                                guard let (completed, _) = await call(.POST, "/v1/approvals/\(id)/complete", nil, auth), completed == 200 else {
                                    continue
                                }
                                acknowledged(id, "completed")
                            }
                        }
                    }
                }
                try await running.exited()
                #expect(running.terminationReason == .uncaughtSignal)
                running = try await MailDeliveryProcessTests.startDaemon(raised, log: log)
                runningPort = running.port
            }
            defer { running.stop() }
            var last: [String: String] = [:]
            for (id, state) in answered.states.withLock({ $0 }) { last[id] = state }
            #expect(last.values.filter { $0 == "completed" }.count >= 150)

            // Restarted on the same file: an answered approval is approved or completed; an answered completion, completed.
            var lost: [String] = []
            for (id, state) in last {
                let (status, answer) = try await DaemonProcessTests.http(.GET, "http://127.0.0.1:\(runningPort)/v1/approvals/\(id)", headers: auth)
                let now = answer["status"] as? String ?? "\(status)"
                let held = state == "completed" ? now == "completed" : ["approved", "completed"].contains(now)
                if !held { lost.append("\(id): answered \(state), now \(now)") }
            }
            #expect(lost.isEmpty, "\(lost.count) of \(last.count) answered transitions were lost: \(lost.prefix(5))")
        }
    }
}
