import CountersignCore
import HTTPTypes
import Hummingbird

/// `GET /healthz`: 200 while the database answers, 503 otherwise.
struct HealthController: Sendable {
    let store: any StoreHealth
    let push: any PushSender
    /// `nil` when no SMTP server is configured.
    let mail: (any MailSender)?

    func addRoutes(to router: Router<AppRequestContext>) {
        router.get("healthz", use: health)
    }

    struct Answer: Encodable {
        var status: String
        var database: String
        var push: String
        var mail: String
        /// A cluster node's id and its notification connection (absent on SQLite).
        var node: String?
        var notifications: String?
    }

    @Sendable func health(_ request: Request, context: AppRequestContext) async throws -> Response {
        let databaseOK = await store.ping()
        let answer = Answer(
            status: databaseOK ? "ok" : "unavailable", database: databaseOK ? "ok" : "unavailable", push: push.health.rawValue,
            mail: (mail?.health ?? .disabled).rawValue, node: store.cluster?.node, notifications: store.cluster?.notifications)
        var response = try context.responseEncoder.encode(answer, from: request, context: context)
        response.status = databaseOK ? .ok : .serviceUnavailable
        return response
    }
}
