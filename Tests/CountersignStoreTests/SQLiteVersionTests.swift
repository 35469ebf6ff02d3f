import Testing

@testable import CountersignStore

/// The shared statements need RETURNING and IS NOT DISTINCT FROM: an older SQLite is refused at open.
@Test func anOlderSQLiteIsRefused() {
    #expect(SQLiteStore.isRecentEnough(sqliteVersion: "3.40.1"))
    #expect(SQLiteStore.isRecentEnough(sqliteVersion: "3.39.0"))
    #expect(SQLiteStore.isRecentEnough(sqliteVersion: "4.0.0"))
    #expect(!SQLiteStore.isRecentEnough(sqliteVersion: "3.38.5"))
    #expect(!SQLiteStore.isRecentEnough(sqliteVersion: "3.34.1"))
    #expect(!SQLiteStore.isRecentEnough(sqliteVersion: ""))
}
