import CountersignCore
import Foundation
import PostgresNIO

extension PostgresStore: ClusterLimitCounter {
    /// One statement: opens a new window, or counts in the open one while it
    /// has room. No row back means refused; the row is then read for its window.
    /// Keys (addresses, emails) are stored as SHA-256.
    public func reserve(
        _ name: RateLimitName, key: String, limit: RateLimit, now: Date
    ) async throws -> (
        admission: WindowCounter.Admission, windowOpened: Date
    ) {
        let hashed = SecureToken.sha256Hex(key)
        let rows = try await rows(
            """
            WITH counted AS (
                INSERT INTO rate_counters AS c (name, key, opened, count) VALUES (\(name.rawValue), \(hashed), \(now.stored), 1)
                ON CONFLICT (name, key) DO UPDATE SET
                    opened = CASE WHEN c.opened + \(limit.window) <= \(now.stored) THEN \(now.stored) ELSE c.opened END,
                    count = CASE WHEN c.opened + \(limit.window) <= \(now.stored) THEN 1 ELSE c.count + 1 END
                WHERE c.opened + \(limit.window) <= \(now.stored) OR c.count < \(limit.count)
                RETURNING opened, true AS admitted
            )
            SELECT opened, admitted FROM counted
            UNION ALL
            SELECT opened, false FROM rate_counters WHERE name = \(name.rawValue) AND key = \(hashed) AND NOT EXISTS (SELECT 1 FROM counted)
            """)
        guard let row = rows.first else {
            // Refused by a window another node opened after this statement's snapshot.
            return (.refused(retryAfter: max(1, Int(limit.window.rounded(.up)))), now)
        }
        let opened = try row.get("opened", as: Double.self)
        if try row.get("admitted", as: Bool.self) {
            return (.admitted(WindowCounter.Reservation(key: key, opened: opened)), Date(timeIntervalSince1970: opened))
        }
        let retryAfter = max(1, Int((opened + limit.window - now.stored).rounded(.up)))
        return (.refused(retryAfter: retryAfter), Date(timeIntervalSince1970: opened))
    }

    public func refund(_ name: RateLimitName, _ reservation: WindowCounter.Reservation) async throws {
        try await rows(
            """
            UPDATE rate_counters SET count = count - 1
            WHERE name = \(name.rawValue) AND key = \(SecureToken.sha256Hex(reservation.key)) AND opened = \(reservation.opened) AND count > 0
            RETURNING count
            """)
    }
}
