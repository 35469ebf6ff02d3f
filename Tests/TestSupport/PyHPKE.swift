import Foundation

/// PyPI's pyhpke (through `scripts/hpke-open.py`): a receiver no one here wrote,
/// opening what the daemon sealed to a device's key.
public enum PyHPKE {
    /// The plaintext of `sealed` (base64url of enc || ciphertext) opened with the private key in
    /// `privateKeyPEM` (PKCS#8), info "countersign push v1" and `aad`; `nil` when it does not open.
    public static func open(_ sealed: String, privateKeyPEM: String, aad: String) async throws -> String? {
        try await withTemporaryFolder { folder in
            let pem = folder.url.appendingPathComponent("seal.pem")
            try Data(privateKeyPEM.utf8).write(to: pem)
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("scripts/hpke-open.py").path
            let python = try await TestPython.path()
            let (status, output) = try await onOwnThread {
                try runToEnd(python, [script, pem.path, sealed, aad], environment: ProcessInfo.processInfo.environment)
            }
            switch status {
            case 0: return output
            case 10: return nil
            default: throw PyHPKEFailure(output: output)
            }
        }
    }

    /// A P-256 key pair made by PyPI's `cryptography`, as an app no one here wrote would make its sealing key:
    /// the private key (PKCS#8 PEM) and the public key as `sealKey` takes it (base64url of the uncompressed point).
    public static func newKey() async throws -> (privateKeyPEM: String, sealKey: String) {
        let script = """
            import base64
            from cryptography.hazmat.primitives import serialization
            from cryptography.hazmat.primitives.asymmetric import ec
            key = ec.generate_private_key(ec.SECP256R1())
            point = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
            print(base64.urlsafe_b64encode(point).decode().rstrip("="))
            print(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode(), end="")
            """
        let python = try await TestPython.path()
        let (status, output) = try await onOwnThread {
            try runToEnd(python, ["-c", script], environment: ProcessInfo.processInfo.environment)
        }
        guard status == 0, let newline = output.firstIndex(of: "\n") else { throw PyHPKEFailure(output: output) }
        return (String(output[newline...].dropFirst()), String(output[..<newline]))
    }

    /// `plaintext` sealed by pyhpke to `sealKey` (base64url of an uncompressed P-256 point) as the
    /// contract says a push is sealed: DHKEM(P-256), HKDF-SHA256, AES-128-GCM, info
    /// "countersign push v1", `aad`; base64url of enc || ciphertext, as a push's `sealed` member.
    public static func seal(_ plaintext: String, to sealKey: String, aad: String) async throws -> String {
        let script = """
            import base64, sys
            from pyhpke import AEADId, CipherSuite, KDFId, KEMId
            point = base64.urlsafe_b64decode(sys.argv[1] + "=" * (-len(sys.argv[1]) % 4))
            suite = CipherSuite.new(KEMId.DHKEM_P256_HKDF_SHA256, KDFId.HKDF_SHA256, AEADId.AES128_GCM)
            enc, sender = suite.create_sender_context(suite.kem.deserialize_public_key(point), info=b"countersign push v1")
            sealed = enc + sender.seal(sys.argv[2].encode(), aad=sys.argv[3].encode())
            print(base64.urlsafe_b64encode(sealed).decode().rstrip("="), end="")
            """
        let python = try await TestPython.path()
        let (status, output) = try await onOwnThread {
            try runToEnd(python, ["-c", script, sealKey, plaintext, aad], environment: ProcessInfo.processInfo.environment)
        }
        guard status == 0 else { throw PyHPKEFailure(output: output) }
        return output
    }

    /// The checker itself failed (pyhpke not installed, say): never taken for "did not open".
    public struct PyHPKEFailure: Error, CustomStringConvertible {
        public let output: String
        public var description: String { "scripts/hpke-open.py failed: \(output)" }
    }
}
