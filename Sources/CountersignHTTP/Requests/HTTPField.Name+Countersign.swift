import HTTPTypes

extension HTTPField.Name {
    static let apiKey = Self("X-API-Key")!
    static let xForwardedFor = Self("X-Forwarded-For")!
    static let referrerPolicy = Self("Referrer-Policy")!
}
