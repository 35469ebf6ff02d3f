import Hummingbird

extension Request {
    /// `?wait=S` of a status route: whole seconds 0…30 to hold the answer while pending (0 when absent).
    func longPollSeconds() throws -> Int {
        guard let raw = uri.queryParameters["wait"] else { return 0 }
        guard let seconds = Int(String(raw)), (0...APILimits.maxLongPollSeconds).contains(seconds) else {
            throw APIError.invalidRequest("The parameter `wait` must be a whole number of seconds from 0 to \(APILimits.maxLongPollSeconds).")
        }
        return seconds
    }
}
