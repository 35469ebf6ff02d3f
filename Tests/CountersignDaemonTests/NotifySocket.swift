import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A test-owned `NOTIFY_SOCKET`: a bound Unix datagram socket collecting what
/// the daemon sends. Like systemd, it reads every datagram as it comes (on a
/// thread of its own), so the daemon's queue never fills while a test is busy
/// elsewhere; ``receive(timeout:)`` hands them out in order.
final class NotifySocket: @unchecked Sendable {
    let path: String
    private let descriptor: Int32
    private final class Inbox: Sendable {
        let state = Mutex<(messages: [String], closed: Bool)>(([], false))
    }
    private let inbox = Inbox()

    /// `path` is a file path, or `@name` for the abstract namespace.
    init(path: String) throws {
        self.path = path
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        guard descriptor >= 0 else { throw SocketError("socket() failed") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let length = abstract ? socklen_t(MemoryLayout<sa_family_t>.size + bytes.count) : socklen_t(MemoryLayout<sockaddr_un>.size)
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length)
            }
        }
        guard result == 0 else { throw SocketError("bind(\(path)) failed: \(errno)") }
        Thread.detachNewThread { [descriptor, inbox] in
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !inbox.state.withLock({ $0.closed }) {
                var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 100) == 1 else { continue }
                let count = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                guard count > 0 else { continue }
                let message = String(decoding: buffer[..<count], as: UTF8.self)
                inbox.state.withLock { $0.messages.append(message) }
            }
            close(descriptor)
        }
    }

    deinit {
        inbox.state.withLock { $0.closed = true }
        unlink(path)
    }

    /// The next datagram, or `nil` after `timeout`.
    func receive(timeout: Duration) async throws -> String? {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        repeat {
            let next: String? = inbox.state.withLock { state in
                state.messages.isEmpty ? nil : state.messages.removeFirst()
            }
            if let next { return next }
            if clock.now >= deadline { return nil }
            try await Task.sleep(for: .milliseconds(10))
        } while true
    }

    struct SocketError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
