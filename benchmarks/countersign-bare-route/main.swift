// The benchmark's reference: a bare Hummingbird 2 route answering "ok", built
// and run beside the daemon so that status polls are measured as a ratio of it;
// and a route that holds each request until it is released (or `wait` seconds
// pass), the framework's own cost of a request waiting on an open connection
// and of answering every waiting one at once.
//
//     countersign-bare-route PORT
//     countersign-bare-route PORT --nio     (the floor: SwiftNIO alone, BareNIO.swift)
import Foundation
import Hummingbird
import Synchronization

/// The held requests' continuations, all resumed by `POST /release`.
final class Release: Sendable {
    private let waiting = Mutex<[CheckedContinuation<Void, Never>]>([])

    func wait() async {
        await withCheckedContinuation { continuation in waiting.withLock { $0.append(continuation) } }
    }

    func releaseAll() -> Int {
        let released = waiting.withLock { waiting in
            defer { waiting = [] }
            return waiting
        }
        for continuation in released { continuation.resume() }
        return released.count
    }
}

let port = CommandLine.arguments.dropFirst().first.flatMap { Int($0) } ?? 8090
if CommandLine.arguments.contains("--nio") {
    try await runBareNIO(port: port)
    exit(0)
}
let release = Release()
let router = Router()
router.get("/api/mobile/auth/reset/phone/status/{requestId}") { _, _ in "ok" }
router.get("/held") { request, _ in
    if request.uri.queryParameters.get("until") == "released" {
        await release.wait()
    } else {
        let seconds = request.uri.queryParameters.get("wait", as: Int.self) ?? 30
        try await Task.sleep(for: .seconds(min(max(seconds, 0), 600)))
    }
    return "ok"
}
router.post("/release") { _, _ in "\(release.releaseAll())" }
let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port), backlog: 4096))
try await app.runService()
