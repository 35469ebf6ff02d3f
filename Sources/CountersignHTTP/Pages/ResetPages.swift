import CountersignCore
import Mustache

/// The reset link's web pages, server-rendered from built-in Mustache
/// templates: no script, one inline style sheet (the page's CSP allows only that).
enum ResetPages {
    /// The form: new password twice, the token in a hidden field.
    static func form(email: String, token: String, problem: String? = nil) -> String {
        var context: [String: Any] = [
            "title": "Choose a new password", "email": maskedEmail(email), "token": token, "rule": rule,
        ]
        if let problem { context["problem"] = problem }
        return formLibrary.render(context, withTemplate: "layout") ?? ""
    }

    static func success() -> String {
        messagePage(["title": "Your password was changed", "message": "You can now sign in with your new password."])
    }

    /// The link is unknown, used, replaced, out of tries or out of time.
    static func expired() -> String {
        messagePage(
            [
                "title": "This link has expired or was already used",
                "message": "Reset links work once, for a short time. Ask for a new one from the app's sign-in screen.",
            ])
    }

    static func problem(title: String, message: String) -> String {
        messagePage(["title": title, "message": message])
    }

    static var rule: String {
        "At least \(PasswordPolicy.minimumCharacters) characters, at most \(PasswordPolicy.maximumBytes) bytes, no control characters."
    }

    /// `a***@example.com`: enough to recognise one's own account, not to learn someone's address.
    static func maskedEmail(_ email: String) -> String {
        guard let at = email.lastIndex(of: "@"), at > email.startIndex else { return "***" }
        return String(email[email.startIndex]) + "***" + email[at...]
    }

    private static func messagePage(_ context: [String: Any]) -> String {
        messageLibrary.render(context, withTemplate: "layout") ?? ""
    }

    /// The layout with its `body` partial: one library per kind of page, made once.
    private static let formLibrary = MustacheLibrary(templates: ["layout": layout, "body": formBody])
    private static let messageLibrary = MustacheLibrary(templates: ["layout": layout, "body": messageBody])

    // The templates are constants of this file: a test renders each of them.
    // swift-format-ignore: NeverUseForceTry
    private static let layout = try! MustacheTemplate(
        string: """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="referrer" content="no-referrer">
            <title>{{title}}</title>
            <style>
            body { font-family: -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d1d1f; background: #f5f5f7; margin: 0; }
            main { max-width: 26rem; margin: 4rem auto; background: #fff; padding: 2rem; border-radius: 12px; box-shadow: 0 1px 4px rgba(0,0,0,.08); }
            h1 { font-size: 1.4rem; margin-top: 0; }
            label { display: block; margin: 1rem 0 .3rem; font-weight: 600; }
            input[type=password] { width: 100%; box-sizing: border-box; padding: .6rem; font-size: 1rem; border: 1px solid #bbb; border-radius: 6px; }
            button { margin-top: 1.4rem; width: 100%; padding: .7rem; font-size: 1rem; background: #0a66c2; color: #fff; border: 0; border-radius: 6px; cursor: pointer; }
            .problem { background: #fdecea; color: #8a1c12; padding: .7rem; border-radius: 6px; }
            .rule, .account { color: #555; font-size: .9rem; }
            </style>
            </head>
            <body>
            <main>
            <h1>{{title}}</h1>
            {{> body}}
            </main>
            </body>
            </html>

            """)

    // swift-format-ignore: NeverUseForceTry
    private static let formBody = try! MustacheTemplate(
        string: """
            <p class="account">For the account <strong id="account">{{email}}</strong>.</p>
            {{#problem}}<p class="problem" id="problem" role="alert">{{problem}}</p>{{/problem}}
            <form method="post" action="reset-password">
            <input type="hidden" name="token" value="{{token}}">
            <label for="password">New password</label>
            <input type="password" id="password" name="password" autocomplete="new-password" required>
            <label for="confirm">New password, again</label>
            <input type="password" id="confirm" name="confirm" autocomplete="new-password" required>
            <p class="rule">{{rule}}</p>
            <button type="submit" id="submit">Set the new password</button>
            </form>

            """)

    // swift-format-ignore: NeverUseForceTry
    private static let messageBody = try! MustacheTemplate(string: "<p id=\"message\">{{message}}</p>\n")
}
