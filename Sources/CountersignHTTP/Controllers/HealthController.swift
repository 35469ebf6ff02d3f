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

    struct HealthResponse: Encodable {
        var status: String
        var database: String
        var push: PushField
        var mail: String
        /// A cluster node's id and its notification connection (absent on SQLite).
        var node: String?
        var notifications: String?
    }

    /// One provider configured (or none): its health as a string. More than one:
    /// an object with a member per provider, `disabled` for those not configured.
    enum PushField: Encodable {
        case one(PushHealth)
        case each([PushProvider: PushHealth])

        init(_ sender: any PushSender) {
            guard sender.offer.providers.count > 1 else {
                self = .one(sender.health)
                return
            }
            let configured = sender.providerHealth
            self = .each(Dictionary(uniqueKeysWithValues: PushProvider.allCases.map { ($0, configured[$0] ?? .disabled) }))
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .one(let health): try container.encode(health.rawValue)
            case .each(let each):
                try container.encode(Dictionary(uniqueKeysWithValues: each.map { ($0.key.rawValue, $0.value.rawValue) }))
            }
        }
    }

    @Sendable func health(_ request: Request, context: AppRequestContext) async throws -> Response {
        let databaseOK = await store.ping()
        let answer = HealthResponse(
            status: databaseOK ? "ok" : "unavailable", database: databaseOK ? "ok" : "unavailable", push: PushField(push),
            mail: (mail?.health ?? .disabled).rawValue, node: store.cluster?.node, notifications: store.cluster?.notifications)
        var response = try context.responseEncoder.encode(answer, from: request, context: context)
        response.status = databaseOK ? .ok : .serviceUnavailable
        return response
    }
}
