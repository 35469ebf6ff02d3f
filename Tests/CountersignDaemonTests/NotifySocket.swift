import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A test-owned `NOTIFY_SOCKET`: a bound Unix datagram socket collecting what the daemon sends.
final class NotifySocket {
    let path: String
    private let descriptor: Int32

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
    }

    deinit {
        close(descriptor)
        unlink(path)
    }

    /// The next datagram, or `nil` after `timeout`.
    func receive(timeout: Duration) -> String? {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        guard poll(&poller, 1, milliseconds) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(descriptor, &buffer, buffer.count, 0)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }

    struct SocketError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
