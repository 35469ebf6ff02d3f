import HTTPTypes
import Hummingbird
import Logging

/// One log line per request, naming the route template, never the raw path:
/// paths carry request ids, which are credentials.
struct AccessLogMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        Self.log(request, context: context, status: response.status, since: start)
        return response
    }

    /// Out of line and synchronous, as ``ErrorMiddleware/response(to:request:context:)``.
    @inline(never)
    static func log(_ request: Request, context: Context, status: HTTPResponse.Status, since start: ContinuousClock.Instant) {
        let elapsed = (ContinuousClock.now - start).components
        context.logger.debug(
            "request",
            metadata: [
                "method": "\(request.method.rawValue)",
                "route": "\(context.endpointPath ?? "unmatched")",
                "status": "\(status.code)",
                "ms": "\(elapsed.seconds * 1000 + elapsed.attoseconds / 1_000_000_000_000_000)",
            ]
        )
    }
}
