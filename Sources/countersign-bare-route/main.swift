// The benchmark's reference: a bare Hummingbird 2 route answering "ok", built
// and run beside the daemon so that status polls are measured as a ratio of it.
//
//     countersign-bare-route PORT
import Hummingbird

let port = CommandLine.arguments.dropFirst().first.flatMap { Int($0) } ?? 8090
let router = Router()
router.get("/api/mobile/auth/reset/phone/status/{requestId}") { _, _ in "ok" }
let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
try await app.runService()
