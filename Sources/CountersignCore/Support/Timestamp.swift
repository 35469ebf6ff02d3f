import Foundation

/// RFC 3339 in UTC with milliseconds, the API's timestamp form.
public enum Timestamp {
    public static func string(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt))
    }
}
