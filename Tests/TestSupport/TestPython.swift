import Foundation
import Synchronization

/// The tests' Python, with the packages of `requirements-test.txt`: a virtual environment
/// under `.build/` that `scripts/test-venv.sh` makes on first use (and again when the file
/// changes). Made once per test process; a test that needs it and cannot have it fails with
/// the script's one line (no `venv` module, PyPI not reachable), it is never skipped.
public enum TestPython {
    private static let made = Mutex<Task<String, any Error>?>(nil)

    /// The path of its `python`.
    public static func path() async throws -> String {
        let task = made.withLock { made in
            if let made { return made }
            let task = Task { try await onOwnThread { try make() } }
            made = task
            return task
        }
        return try await task.value
    }

    static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/test-venv.sh").path
    }

    private static func make() throws -> String {
        let (status, output) = try runToEnd("/bin/sh", [script])
        let lines = output.split(separator: "\n")
        guard status == 0, let path = lines.last, path.hasPrefix("/") else {
            throw Unavailable(reason: lines.last.map(String.init) ?? "scripts/test-venv.sh exited \(status)")
        }
        return String(path)
    }

    public struct Unavailable: Error, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }
    }
}
