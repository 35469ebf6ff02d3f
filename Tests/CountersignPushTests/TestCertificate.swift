import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import X509

/// A self-signed certificate for 127.0.0.1, made for one test's TLS server.
struct TestCertificate {
    /// The certificate's PEM, for the client's trust roots.
    let certificatePEM: String
    let keyPEM: String

    init() throws {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName("127.0.0.1") }
        let now = Date()
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(key.publicKey),
            notValidBefore: now - 3600,
            notValidAfter: now + 3600,
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                SubjectAlternativeNames([.ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1]))])
            },
            issuerPrivateKey: .init(key))
        certificatePEM = try certificate.serializeAsPEM().pemString
        keyPEM = key.pemRepresentation
    }

    func serverConfiguration() throws -> TLSConfiguration {
        TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(try NIOSSLCertificate(bytes: Array(certificatePEM.utf8), format: .pem))],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(keyPEM.utf8), format: .pem)))
    }

    /// Writes the certificate to `folder` as a CA file; returns its path.
    func caFile(in folder: URL) throws -> String {
        let path = folder.appendingPathComponent("ca.pem").path
        try certificatePEM.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}
