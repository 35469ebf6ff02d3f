import Foundation

/// Facts about a host name as written in a URL.
public enum NetworkHost {
    /// 127.0.0.0/8, `::1` or `localhost` (brackets and case ignored): traffic that never leaves the machine.
    public static func isLoopback(_ host: String) -> Bool {
        let host = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")).lowercased()
        if host == "localhost" || host == "::1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }
}
