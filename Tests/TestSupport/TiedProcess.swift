import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A child process that cannot outlive the test process that started it.
///
/// The child is started through `bash`, which keeps the read end of a pipe
/// whose only writer is this process, starts a watcher on it, and then
/// `exec`s the program (same pid, so signals sent to ``processIdentifier``
/// reach the program itself). When the test process ends, however it ends
/// (a crash, `kill -9`, a cancelled CI job), the kernel closes the write end,
/// the watcher reads end-of-file and kills the program with SIGKILL. A
/// watcher whose program has already exited finds it is no longer the
/// program's child and kills nothing.
public final class TiedProcess: @unchecked Sendable {
    public let process: Process
    private let tie: Pipe

    /// The watcher, then the program with the watcher's pipe closed. The
    /// watcher keeps no other descriptor: Foundation learns that the program
    /// ended when the last copy of a socket the program inherits is closed.
    public static let launcher = #"""
        exec 3<&0 </dev/null
        program=$$
        {
          for fd in /proc/$BASHPID/fd/*; do
            fd=${fd##*/}
            if [ "$fd" -gt 3 ]; then eval "exec $fd>&-"; fi
          done
          while IFS= read -r _ <&3; do :; done
          read -r _ _ _ parent _ < "/proc/$BASHPID/stat"
          if [ "$parent" = "$program" ]; then kill -KILL "$program"; fi
        } >/dev/null 2>&1 &
        exec 3<&-
        exec "$0" "$@"
        """#

    /// Starts `executable` with `arguments`; standard input is `/dev/null`.
    /// The watcher ends when the program has ended and ``waitUntilExit()`` or
    /// ``stop()`` was called (or this object is gone).
    public init(
        _ executable: URL, _ arguments: [String], environment: [String: String]? = nil, output: FileHandle? = nil,
        error: FileHandle? = nil, pipe: Pipe? = nil
    ) throws {
        process = Process()
        tie = Pipe()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", Self.launcher, executable.path] + arguments
        if let environment { process.environment = environment }
        process.standardInput = tie
        if let pipe {
            process.standardOutput = pipe
            process.standardError = pipe
        } else {
            process.standardOutput = output ?? FileHandle.nullDevice
            process.standardError = error ?? output ?? FileHandle.nullDevice
        }
        // Foundation owns the read end from here (closing it again could close a
        // descriptor reused since); only the write end matters for end-of-file.
        try launchingAlone { try process.run() }
    }

    deinit { try? tie.fileHandleForWriting.close() }

    public var processIdentifier: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }
    public var terminationStatus: Int32 { process.terminationStatus }

    /// Sends `signal` to the program.
    public func signal(_ signal: Int32) { kill(process.processIdentifier, signal) }

    /// Waits for the program to end, and lets its watcher go.
    public func waitUntilExit() {
        process.waitUntilExit()
        try? tie.fileHandleForWriting.close()
    }

    /// SIGKILL if it still runs, then waits: for `defer` blocks.
    public func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        waitUntilExit()
    }
}

extension TiedProcess {
    /// Waits up to `limit` for the program to end; whether it did. The limit
    /// turns a hang into a failure; it is no measure of speed.
    public func exit(within limit: Duration) async throws -> Bool {
        let clock = ContinuousClock()
        let start = clock.now
        while process.isRunning {
            guard clock.now - start < limit else { return false }
            try await Task.sleep(for: .milliseconds(20))
        }
        waitUntilExit()
        return true
    }
}

/// Runs blocking work (a child process waited for, say) on a thread of its
/// own, so that it does not hold one of the few threads every test's tasks
/// share: in-process servers the child talks to need those threads to answer.
public func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
    }
}

/// Foundation's `Process.run()` is not safe to call from several threads at
/// once on Linux (a test run crashed inside it, copying while another launch
/// ran); every launch in the tests goes through this one lock.
public func launchingAlone<T>(_ launch: () throws -> T) rethrows -> T {
    try launches.withLock { _ in try launch() }
}

private let launches = Mutex(())
