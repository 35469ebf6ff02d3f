import GRDB
import Synchronization

/// Writes that arrive together share one transaction, and so one fsync of
/// the WAL (`synchronous = FULL` still holds): while a batch commits, the
/// writes arriving queue up, and the next batch takes them all. A lone write
/// waits for no timer.
///
/// Each write runs in a savepoint of its own, so one that throws takes back
/// only its own changes and gets its own error. If taking them back fails
/// (`ROLLBACK TO` itself throws), its changes cannot be told from the others'
/// and the whole batch fails. Every caller is answered only once the whole
/// transaction has committed; if the commit fails, every write of the batch
/// gets that error (none of them is durable).
final class GroupCommit: Sendable {
    private struct Job: Sendable {
        /// Answers a caller whose write never ran.
        let fail: @Sendable (any Error) -> Void
        /// Runs the write in its savepoint; returns how to answer the caller once the batch commits.
        let run: @Sendable (Database) throws -> @Sendable (Result<Void, any Error>) -> Void
    }

    private struct Queue: Sendable {
        var jobs: [Job] = []
        var scheduled = false
    }

    private let pool: DatabasePool
    private let queue = Mutex(Queue())
    /// Takes a failed write's changes back (a seam: tests make it fail).
    private let rollback: @Sendable (Database) throws -> Void

    init(pool: DatabasePool, rollback: @escaping @Sendable (Database) throws -> Void = GroupCommit.rollbackToSavepoint) {
        self.pool = pool
        self.rollback = rollback
    }

    static func rollbackToSavepoint(_ db: Database) throws {
        try db.execute(sql: "ROLLBACK TRANSACTION TO SAVEPOINT job")
        try db.execute(sql: "RELEASE SAVEPOINT job")
    }

    /// A write's changes could not be taken back: the batch cannot commit.
    struct RollbackFailed: Error {
        let underlying: any Error
    }

    func write<T: Sendable>(_ work: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let rollback = rollback
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let job = Job(fail: { continuation.resume(throwing: $0) }) { db in
                // Its own savepoint, not GRDB's `inSavepoint`: that one keeps
                // going when `ROLLBACK TO` fails, and the batch would commit
                // the failed write's changes.
                let outcome: Result<T, any Error>
                do {
                    try db.cachedStatement(sql: "SAVEPOINT job").execute()
                    let value = try work(db)
                    try db.cachedStatement(sql: "RELEASE SAVEPOINT job").execute()
                    outcome = .success(value)
                } catch {
                    outcome = .failure(error)
                    if db.isInsideTransaction {
                        do { try rollback(db) } catch { throw RollbackFailed(underlying: error) }
                    }
                }
                return { committed in
                    switch committed {
                    // Nothing of the batch is durable: whatever this write saw of the others did not happen.
                    case .failure(let error): continuation.resume(throwing: error)
                    case .success: continuation.resume(with: outcome)
                    }
                }
            }
            let schedule = queue.withLock { queue in
                queue.jobs.append(job)
                defer { queue.scheduled = true }
                return !queue.scheduled
            }
            if schedule { drain() }
        }
    }

    /// Queues one batch on the database's writer: it takes every job waiting when it starts.
    private func drain() {
        pool.asyncWriteWithoutTransaction { [self] db in
            let jobs = queue.withLock { queue in
                defer {
                    queue.jobs = []
                    queue.scheduled = false
                }
                return queue.jobs
            }
            var answers: [@Sendable (Result<Void, any Error>) -> Void] = []
            answers.reserveCapacity(jobs.count)
            // Each job's savepoint keeps the pages it changes in a sub-journal, which SQLite spills
            // to a new file in the temporary directory past 64 KiB: most batches did. A batch's
            // jobs are small (a create, a transition, a batch of audit events), so for its
            // transaction the sub-journal stays in memory. Not for other writes: a large prune's
            // sub-journal, or an index build's sort, would be held in memory too. Only a cost if
            // it cannot be set; the batch runs either way.
            // Not cached, unlike each job's savepoint: SQLite prepares a pragma that sets a value
            // again at each run (its program expires after one), so a cache would save nothing.
            let inMemory = (try? db.execute(sql: "PRAGMA temp_store = MEMORY")) != nil
            defer { if inMemory { try? db.execute(sql: "PRAGMA temp_store = DEFAULT") } }
            do {
                try db.inTransaction(.immediate) {
                    for job in jobs {
                        // A throw here (the write's changes could not be taken back) fails the batch.
                        answers.append(try job.run(db))
                        // Some errors (a full disk, I/O) make SQLite roll the whole transaction back.
                        guard db.isInsideTransaction else { throw DatabaseError(message: "the transaction was rolled back") }
                    }
                    return .commit
                }
            } catch {
                // Nothing of this batch is durable: the writes that ran fail too, those that did not get the same error.
                for answer in answers { answer(.failure(error)) }
                for job in jobs.dropFirst(answers.count) { job.fail(error) }
                return
            }
            for answer in answers { answer(.success(())) }
        }
    }
}
