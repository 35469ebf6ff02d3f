import TestSupport

/// The account every HTTP test plays with.
enum Fixture {
    static let email = "ana@example.com"
    static let password = "correct horse"
    static let newPassword = "staple orbit lantern"
}
