import Hummingbird

/// Counts and times every request by route template and status.
struct MetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: AppMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        metrics.httpRequest(
            method: request.method.rawValue,
            route: context.endpointPath ?? "unmatched",
            status: Int(response.status.code),
            duration: ContinuousClock.now - start
        )
        return response
    }
}
