import CountersignCore
import CountersignMail
import Foundation

/// The email reset's settings: the SMTP server (none: mail off), the link,
/// the templates, how long a code works, and where the daemon's secret key is.
public struct EmailConfiguration: Sendable, Equatable {
    /// `nil`: no SMTP server, so nothing is queued or sent.
    public var smtp: SMTPConfiguration?
    /// How long a code and its link work.
    public var codeTTL: TimeInterval = 900
    /// The daemon's address as users reach it (behind its proxy), for the default link.
    public var publicURL: String?
    /// An app's own link (`photosync://reset-password?token={token}&email={email}`) instead of the daemon's page.
    public var linkTemplate: ResetLinkTemplate?
    /// A folder with `reset.txt.mustache` and/or `reset.html.mustache` replacing the built-in mail templates.
    public var templatesDirectory: String?
    /// The daemon's secret (keys the code hashes, seals queued mail); `nil`: the default place.
    public var secretKeyFile: String?

    public init() {}

    /// The link template in force: the explicit one, else the daemon's own page
    /// at `--public-url`, else at `http://` and the listen address (`usesListenAddress`: warn about it).
    public func link(host: String, port: Int) -> (template: ResetLinkTemplate, usesListenAddress: Bool) {
        if let linkTemplate { return (linkTemplate, false) }
        if let publicURL { return (.page(publicURL: publicURL), false) }
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return (.page(publicURL: "http://\(shownHost):\(port)"), true)
    }

    /// `$CREDENTIALS_DIRECTORY/secret-key` when the unit passes one, else
    /// `countersign.key` beside the database (created on first start).
    public func secretKeyPath(databasePath: String, environment: [String: String]) -> String {
        if let secretKeyFile { return secretKeyFile }
        if let credentials = environment["CREDENTIALS_DIRECTORY"] {
            let candidate = credentials + "/" + Self.secretKeyCredential
            if FileManager.default.fileExists(atPath: candidate) { return candidate }
        }
        return URL(fileURLWithPath: databasePath).deletingLastPathComponent().appendingPathComponent("countersign.key").path
    }

    public static let secretKeyCredential = "secret-key"
    public static let smtpPasswordCredential = "smtp-password"
}
