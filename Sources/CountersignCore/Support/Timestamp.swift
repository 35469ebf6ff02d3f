import Foundation

/// RFC 3339 in UTC with milliseconds, the API's timestamp form.
public enum Timestamp {
    private static let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt)

    public static func string(_ date: Date) -> String {
        style.format(date)
    }
}
