// The benchmark's reference: a bare Hummingbird 2 route answering "ok", built
// and run beside the daemon so that status polls are measured as a ratio of it;
// and a route that holds each request `wait` seconds before answering, the
// framework's own cost of a request waiting on an open connection.
//
//     countersign-bare-route PORT
import Hummingbird

let port = CommandLine.arguments.dropFirst().first.flatMap { Int($0) } ?? 8090
let router = Router()
router.get("/api/mobile/auth/reset/phone/status/{requestId}") { _, _ in "ok" }
router.get("/held") { request, _ in
    let seconds = request.uri.queryParameters.get("wait", as: Int.self) ?? 30
    try await Task.sleep(for: .seconds(min(max(seconds, 0), 600)))
    return "ok"
}
let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port), backlog: 4096))
try await app.runService()
