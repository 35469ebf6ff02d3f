import Foundation
import Synchronization

/// Where a command writes: standard output and standard error, or, for a
/// command a test runs in-process, buffers the test reads when it ends.
public final class Console: Sendable {
    /// The console of the running command (standard output and error unless a test set one).
    @TaskLocal public static var current = Console()

    private struct Captured {
        var output = ""
        var errors = ""
        /// Both, in the order written. The binary's standard output goes through the C
        /// library's buffer and its errors at once, so into a pipe its errors may come
        /// first: a test checks what is said, not the order of the two.
        var both = ""
    }
    private let captured = Mutex(Captured())
    /// A test's console: there is no standard input to read either.
    public let isCapturing: Bool

    /// Standard output and standard error.
    public init() {
        isCapturing = false
    }

    private init(capturing: Void) {
        isCapturing = true
    }

    /// A console that keeps what is written.
    public static func capturing() -> Console { Console(capturing: ()) }

    /// What was written to standard output (a capturing console only).
    public var output: String { captured.withLock { $0.output } }
    /// What was written to standard error (a capturing console only).
    public var errors: String { captured.withLock { $0.errors } }
    /// Both, in the order written (a capturing console only).
    public var outputAndErrors: String { captured.withLock { $0.both } }

    /// Writes `text` to standard output, through the C library's buffer as `print` does.
    public func write(_ text: String) {
        guard isCapturing else { return Swift.print(text, terminator: "") }
        captured.withLock {
            $0.output += text
            $0.both += text
        }
    }

    /// Writes `text` to standard error, at once.
    public func writeError(_ text: String) {
        guard isCapturing else { return FileHandle.standardError.write(Data(text.utf8)) }
        captured.withLock {
            $0.errors += text
            $0.both += text
        }
    }
}

/// In the commands, `print` writes to the running command's console.
func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
    Console.current.write(items.map { "\($0)" }.joined(separator: separator) + terminator)
}
