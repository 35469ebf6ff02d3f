import Foundation

/// The fields of a Google service-account key file that FCM needs. The
/// private key never reaches a log: `description` leaves it out.
public struct ServiceAccount: Sendable, CustomStringConvertible {
    public let projectID: String
    public let privateKeyPEM: String
    public let privateKeyID: String
    public let clientEmail: String
    public let tokenURI: String

    public var description: String {
        "service account \(clientEmail) (project \(projectID), key \(privateKeyID.prefix(8))…)"
    }

    public init(projectID: String, privateKeyPEM: String, privateKeyID: String, clientEmail: String, tokenURI: String) {
        self.projectID = projectID
        self.privateKeyPEM = privateKeyPEM
        self.privateKeyID = privateKeyID
        self.clientEmail = clientEmail
        self.tokenURI = tokenURI
    }

    /// Reads and checks a key file; errors name the file and the field, never a value.
    public static func load(path: String) throws -> ServiceAccount {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ServiceAccountError("cannot read FCM service account file \(path)")
        }
        return try parse(data, source: path)
    }

    /// A file of white space alone: push off, so that the unit's credential can stay in place unused.
    public static func isEmptyFile(_ data: Data) -> Bool {
        data.allSatisfy { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
    }

    public static func parse(_ data: Data, source: String) throws -> ServiceAccount {
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw ServiceAccountError("FCM service account \(source) is not a JSON object")
        }
        func field(_ name: String) throws -> String {
            guard let value = object[name] as? String, !value.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
                throw ServiceAccountError("FCM service account \(source): missing or empty field \"\(name)\"")
            }
            return value
        }
        guard try field("type") == "service_account" else {
            throw ServiceAccountError("FCM service account \(source): field \"type\" must be \"service_account\"")
        }
        let tokenURI = try field("token_uri")
        guard let url = URL(string: tokenURI), url.scheme == "https" || url.scheme == "http", url.host != nil else {
            throw ServiceAccountError("FCM service account \(source): field \"token_uri\" is not an http(s) URL")
        }
        let key = try field("private_key")
        guard key.contains("-----BEGIN PRIVATE KEY-----") || key.contains("-----BEGIN RSA PRIVATE KEY-----") else {
            throw ServiceAccountError("FCM service account \(source): field \"private_key\" is not a PEM private key")
        }
        return ServiceAccount(
            projectID: try field("project_id"),
            privateKeyPEM: key,
            privateKeyID: try field("private_key_id"),
            clientEmail: try field("client_email"),
            tokenURI: tokenURI
        )
    }
}

public struct ServiceAccountError: Error, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
