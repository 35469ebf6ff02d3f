import Testing

@testable import CountersignStore

/// The shared statements need RETURNING: an older SQLite is refused at open.
@Test func anOlderSQLiteIsRefused() {
    #expect(SQLiteStore.isRecentEnough(sqliteVersion: "3.40.1"))
    #expect(SQLiteStore.isRecentEnough(sqliteVersion: "3.37.2"))
    #expect(SQLiteStore.isRecentEnough(sqliteVersion: "3.35.0"))
    #expect(SQLiteStore.isRecentEnough(sqliteVersion: "4.0.0"))
    #expect(!SQLiteStore.isRecentEnough(sqliteVersion: "3.34.1"))
    #expect(!SQLiteStore.isRecentEnough(sqliteVersion: "3.8.11"))
    #expect(!SQLiteStore.isRecentEnough(sqliteVersion: ""))
}
