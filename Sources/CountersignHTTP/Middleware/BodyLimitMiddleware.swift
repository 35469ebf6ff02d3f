import HTTPTypes
import Hummingbird

/// Refuses a declared body over the limit before anything reads it.
struct BodyLimitMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > context.maxUploadSize {
            throw APIError.payloadTooLarge
        }
        return try await next(request, context)
    }
}
