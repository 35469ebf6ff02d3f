import CountersignCore
import Foundation
import Logging

#if canImport(Glibc)
import CoreFoundation
import Glibc
#endif

/// How the daemon writes its log lines to standard error.
public enum LogFormat: String, Sendable, CaseIterable {
    /// `TIME LEVEL LABEL: key=value … [SOURCE] message`; under systemd, when standard
    /// error is the journal, `<PRIORITY>LEVEL LABEL: …` instead: the journal keeps the
    /// time itself and files each line under its priority (`journalctl -p warning`).
    case text
    /// One JSON object a line: `time`, `level`, `label`, `source`, `message` and each metadata key.
    case json
}

/// The daemon's log handler: ``LogFormat`` on standard error, one `write` a line.
public struct DaemonLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    let label: String
    let format: LogFormat
    /// Standard error is the journal (`JOURNAL_STREAM` names it): priority prefixes, no timestamp.
    let journal: Bool

    public init(label: String, level: Logger.Level, format: LogFormat, journal: Bool) {
        self.label = label
        self.logLevel = level
        self.format = format
        self.journal = journal
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let explicit = event.metadata { merged.merge(explicit) { $1 } }
        if let error = event.error { merged["error"] = "\(error)" }
        let line: String
        switch format {
        case .json:
            var object: [String: String] = merged.mapValues { "\($0)" }
            object["time"] = Self.timestamp()
            object["level"] = event.level.rawValue
            object["label"] = label
            object["source"] = event.source
            object["message"] = "\(event.message)"
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
            line = String(decoding: data, as: UTF8.self)
        case .text:
            // Values often carry text from outside (a user agent, a push service's answer): each is
            // escaped and quoted as needed, so that one event stays one line and no value adds a field.
            let pretty =
                merged.isEmpty
                ? ""
                : " "
                    + merged.sorted { $0.key < $1.key }.map { "\(LogText.escaped($0.key))=\(LogText.field("\($0.value)"))" }
                    .joined(separator: " ")
            let head = journal ? "<\(Self.priority(event.level))>" : Self.timestamp() + " "
            line = "\(head)\(event.level) \(label):\(pretty) [\(event.source)] \(LogText.escaped("\(event.message)"))"
        }
        var bytes = Array(line.utf8)
        bytes.append(0x0A)
        bytes.withUnsafeBytes { _ = write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }

    /// The syslog priority journald files a line under (sd-daemon's `<N>` prefixes).
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    static func timestamp() -> String {
        Date().formatted(.iso8601)
    }

    /// Whether standard error is the journal: `JOURNAL_STREAM` (`DEVICE:INODE`, set by
    /// systemd) names the very file standard error is.
    public static func standardErrorIsJournal(environment: [String: String]) -> Bool {
        guard let value = environment["JOURNAL_STREAM"] else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var status = stat()
        guard fstat(STDERR_FILENO, &status) == 0 else { return false }
        return UInt64(status.st_dev) == device && UInt64(status.st_ino) == inode
    }
}
