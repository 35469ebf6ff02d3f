import CountersignServices
import HTTPTypes
import Hummingbird
import Logging

/// One access-log line and the metrics of every request, errors included,
/// by route template, never the raw path: paths carry request ids, which are
/// credentials.
///
/// The log and the metrics are one middleware, and the work of each is out of
/// line and synchronous: every request waiting further down (a long poll)
/// keeps the async frame of each middleware above it, so each level costs
/// every waiting request memory.
struct AccessLogMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let metrics: AppMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        // A long poll handed to its connection is logged once, when answered,
        // from its arrival (``ConnectionResponder``).
        if response.headers[LongPollHandOff.marker] == nil {
            record(request.method, route: context.endpointPath ?? "unmatched", logger: context.logger, status: response.status, since: start)
        }
        return response
    }

    @inline(never)
    func record(
        _ method: HTTPRequest.Method, route: String, logger: Logger, status: HTTPResponse.Status, since start: ContinuousClock.Instant
    ) {
        let elapsed = ContinuousClock.now - start
        metrics.httpRequest(method: method.rawValue, route: route, status: Int(status.code), duration: elapsed)
        logger.debug(
            "request",
            metadata: [
                "method": "\(method.rawValue)",
                "route": "\(route)",
                "status": "\(status.code)",
                "ms": "\(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)",
            ]
        )
    }
}
