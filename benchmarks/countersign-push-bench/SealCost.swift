import ArgumentParser
import CountersignWire
import Crypto
import Foundation

/// What sealing one push costs on one core, without the daemon around it:
/// `PushSeal.seal` (one ephemeral P-256 key, one ECDH, HKDF, AES-128-GCM)
/// of a prompt's payload of the size the daemon seals, to a device's key,
/// against the same payload's JSON encoding alone. A measurement, not a test.
struct SealCost: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "seal", abstract: "Time sealing a prompt's payload (HPKE) on one core.")

    @Option(help: "Seals per round.") var messages = 20000
    @Option(help: "Rounds.") var rounds = 3

    /// A prompt's payload as a sealed push carries it: the words, the relying service, its context.
    static let payload: [String: String] = [
        "type": "approval_request", "requestId": String(repeating: "r", count: 22), "action": "login",
        "expiresAt": "2026-01-01T00:01:00.000Z", "title": "Sign in to Acme Admin", "body": "Firefox on Linux, from 203.0.113.7",
        "integration": "Acme Admin", "context": #"{"ip":"203.0.113.7","location":"Berlin, DE"}"#,
    ]

    func run() throws {
        let key = SealKey(publicKey: P256.KeyAgreement.PrivateKey().publicKey)
        // As the daemon encodes it (SealedMessages: the FCM builder's shared JSONEncoder).
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let plaintext = try encoder.encode(Self.payload)
        let aad = Self.payload["requestId"]!
        let sealedLength = try PushSeal.seal(plaintext, to: key, aad: aad).utf8.count
        let clock = ContinuousClock()
        for round in 1...rounds {
            var bytes = 0
            let sealing = clock.measure {
                for _ in 0..<messages {
                    bytes &+= (try? PushSeal.seal(plaintext, to: key, aad: aad))?.utf8.count ?? 0
                }
            }
            let encoding = clock.measure {
                for _ in 0..<messages {
                    bytes &+= (try? encoder.encode(Self.payload))?.count ?? 0
                }
            }
            // What the daemon used before: Foundation's JSONSerialization, whose sorted keys go through ICU's collation.
            let serialization = clock.measure {
                for _ in 0..<messages {
                    bytes &+=
                        (try? JSONSerialization.data(withJSONObject: Self.payload, options: [.sortedKeys, .withoutEscapingSlashes]))?.count ?? 0
                }
            }
            // Microseconds per message.
            let each = { (duration: Duration) in duration / .microseconds(messages) }
            print(
                String(
                    format:
                        "round %d: seal %.1f µs each, JSON encoding alone %.1f µs each (JSONSerialization: %.1f µs) (%d plaintext bytes, %d characters sealed; checksum %d)",
                    round, each(sealing), each(encoding), each(serialization), plaintext.count, sealedLength, bytes))
        }
    }
}
