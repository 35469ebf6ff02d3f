import Foundation
import Mustache

/// The reset mail's Mustache templates: `reset.txt` and `reset.html`, built
/// in, each replaceable by a file `reset.txt.mustache` / `reset.html.mustache`
/// in the `--mail-templates` folder.
public struct MailTemplates: Sendable {
    public static let subject = "Your password reset code"
    let text: MustacheTemplate
    let html: MustacheTemplate

    /// What a template can show.
    public struct Content: Sendable {
        public var email: String
        public var code: String
        public var link: String
        /// "15 minutes".
        public var validFor: String
        /// The names of the devices signed in to the account.
        public var devices: [String]

        public init(email: String, code: String, link: String, validFor: String, devices: [String] = []) {
            self.email = email
            self.code = code
            self.link = link
            self.validFor = validFor
            self.devices = devices
        }
    }

    /// The built-in templates, with any found in `directory` in their place.
    public init(directory: String? = nil) throws(MailTemplateError) {
        var text = Self.defaultText
        var html = Self.defaultHTML
        if let directory {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: directory, isDirectory: &isFolder), isFolder.boolValue else {
                throw MailTemplateError("mail templates folder \(directory) does not exist")
            }
            let textFile = directory + "/reset.txt.mustache"
            let htmlFile = directory + "/reset.html.mustache"
            guard FileManager.default.fileExists(atPath: textFile) || FileManager.default.fileExists(atPath: htmlFile) else {
                throw MailTemplateError("mail templates folder \(directory) has neither reset.txt.mustache nor reset.html.mustache")
            }
            if let contents = FileManager.default.contents(atPath: textFile) { text = String(decoding: contents, as: UTF8.self) }
            if let contents = FileManager.default.contents(atPath: htmlFile) { html = String(decoding: contents, as: UTF8.self) }
        }
        do {
            // A plain-text body is not HTML: nothing in it is escaped.
            self.text = try MustacheTemplate(string: "{{% CONTENT_TYPE: TEXT}}" + text)
        } catch {
            throw MailTemplateError("reset.txt.mustache: \(error)")
        }
        do {
            self.html = try MustacheTemplate(string: html)
        } catch {
            throw MailTemplateError("reset.html.mustache: \(error)")
        }
    }

    public func render(_ content: Content) -> (text: String, html: String) {
        // `devices` is a list of `{"name": …}` for a section; `hasDevices` tells an empty one apart.
        let context: [String: Any] = [
            "email": content.email, "code": content.code, "link": content.link, "validFor": content.validFor,
            "devices": content.devices.map { ["name": $0] }, "hasDevices": !content.devices.isEmpty,
        ]
        return (text.render(context), html.render(context))
    }

    /// "15 minutes", "1 hour", "45 seconds": whole minutes from two minutes up.
    public static func duration(_ seconds: TimeInterval) -> String {
        let whole = max(1, Int(seconds.rounded()))
        func unit(_ count: Int, _ name: String) -> String { "\(count) \(name)\(count == 1 ? "" : "s")" }
        if whole >= 3600, whole % 3600 == 0 { return unit(whole / 3600, "hour") }
        if whole >= 120 { return unit(Int((Double(whole) / 60).rounded()), "minute") }
        if whole >= 60, whole % 60 == 0 { return unit(whole / 60, "minute") }
        return unit(whole, "second")
    }

    static let defaultText = """
        Hello,

        Someone asked to reset the password of the account {{email}}.

        Your reset code is: {{code}}

        Enter it in the app, or open this link to choose a new password:
        {{link}}

        The code and the link work once, for {{validFor}}.
        {{#hasDevices}}

        Devices signed in to this account, which stay signed in after a reset:
        {{#devices}}
          - {{name}}
        {{/devices}}
        Sign one out from the device itself (Sign out, DELETE /api/mobile/device)
        or ask the operator to run `countersign device revoke`.
        {{/hasDevices}}

        If you did not ask for this, ignore this mail; your password has not changed.

        """

    static let defaultHTML = """
        <!DOCTYPE html>
        <html lang="en">
        <head><meta charset="utf-8"><title>Your password reset code</title></head>
        <body style="font-family: -apple-system, 'Segoe UI', Roboto, sans-serif; color: #1d1d1f; max-width: 32rem; margin: 0 auto; padding: 1.5rem;">
        <p>Hello,</p>
        <p>Someone asked to reset the password of the account <strong>{{email}}</strong>.</p>
        <p>Your reset code is:</p>
        <p style="font-size: 2rem; font-weight: 600; letter-spacing: 0.3rem;">{{code}}</p>
        <p>Enter it in the app, or choose a new password here:</p>
        <p><a href="{{link}}" style="display: inline-block; padding: 0.6rem 1.2rem; background: #0a66c2; color: #fff; border-radius: 6px; text-decoration: none;">Reset my password</a></p>
        <p style="font-size: 0.85rem; color: #555;">Or copy this address: {{link}}</p>
        <p>The code and the link work once, for {{validFor}}.</p>
        {{#hasDevices}}
        <p>Devices signed in to this account, which stay signed in after a reset:</p>
        <ul>{{#devices}}<li>{{name}}</li>{{/devices}}</ul>
        <p>Sign one out from the device itself (Sign out, <code>DELETE /api/mobile/device</code>) or ask the operator to run <code>countersign device revoke</code>.</p>
        {{/hasDevices}}
        <p>If you did not ask for this, ignore this mail; your password has not changed.</p>
        </body>
        </html>

        """
}

public struct MailTemplateError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
