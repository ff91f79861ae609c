"""Throw-away PKI for the test control plane: a CA, the API server's serving cert, the service-account key,
serving certs for webhooks and the aggregation layer's front-proxy client cert."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pki:
    """Paths of the files kube-apiserver and kube-controller-manager are pointed at."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    sa_key: Path
    sa_pub: Path


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )
    )
    path.chmod(0o600)


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Certificate | None,
    issuer_key: ec.EllipticCurvePrivateKey,
    sans: list[x509.GeneralName] | None = None,
    usage: x509.ObjectIdentifier = ExtendedKeyUsageOID.SERVER_AUTH,
    group: str = "",
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, subject)]
    if group:  # Kubernetes reads a client cert's O as the user's group
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, group))
    name = x509.Name(attributes)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer.subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        # Backdated a little so a clock step between processes cannot make it "not yet valid".
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=30))
    )
    if issuer is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    else:
        builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_pki(directory: Path, service_ip: str) -> Pki:
    """Write a fresh CA, an API server cert valid for 127.0.0.1/localhost/kubernetes.default and an SA key pair."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        sa_key=directory / "sa.key",
        sa_pub=directory / "sa.pub",
    )
    # EC keys: generating RSA keys costs noticeable time on 2 cores, and Kubernetes accepts P-256 everywhere.
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("paddlecloud-test-ca", ca_key, None, ca_key)
    serving_key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address(service_ip)),
        x509.DNSName("localhost"),
        x509.DNSName("kubernetes"),
        x509.DNSName("kubernetes.default"),
        x509.DNSName("kubernetes.default.svc"),
        x509.DNSName("kubernetes.default.svc.cluster.local"),
    ]
    serving = _cert("kube-apiserver", serving_key, ca, ca_key, sans)
    sa_key = ec.generate_private_key(ec.SECP256R1())

    pki.ca_cert.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    _write_key(pki.ca_key, ca_key)
    pki.serving_cert.write_bytes(serving.public_bytes(serialization.Encoding.PEM))
    _write_key(pki.serving_key, serving_key)
    _write_key(pki.sa_key, sa_key)
    pki.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return pki


@dataclass(frozen=True)
class ServingPki:
    """A CA and one serving certificate signed by it (e.g. the test registry's)."""

    ca_cert: Path
    cert: Path
    key: Path


def make_serving_pki(directory: Path, name: str, ips: list[str], dns_names: list[str]) -> ServingPki:
    """Write a fresh CA and a `name` serving cert valid for `ips` and `dns_names` into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = ServingPki(ca_cert=directory / "ca.crt", cert=directory / f"{name}.crt", key=directory / f"{name}.key")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert(f"paddlecloud-test-{name}-ca", ca_key, None, ca_key)
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    sans += [x509.DNSName(n) for n in dns_names]
    pki.ca_cert.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pki.cert.write_bytes(_cert(name, key, ca, ca_key, sans).public_bytes(serialization.Encoding.PEM))
    _write_key(pki.key, key)
    return pki


def _load_ca(ca_cert: Path, ca_key: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = serialization.load_pem_private_key(ca_key.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{ca_key} is not an EC key (make_pki writes P-256 keys)")
    return x509.load_pem_x509_certificate(ca_cert.read_bytes()), key


def issue_serving_cert(
    ca_cert: Path, ca_key: Path, directory: Path, ips: list[str], dns_names: list[str]
) -> tuple[Path, Path]:
    """Write `tls.crt`/`tls.key` (the names controller-runtime's webhook server reads) signed by that CA."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, issuer_key = _load_ca(ca_cert, ca_key)
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    sans += [x509.DNSName(n) for n in dns_names]
    cert, key_path = directory / "tls.crt", directory / "tls.key"
    cert.write_bytes(_cert(dns_names[0], key, ca, issuer_key, sans).public_bytes(serialization.Encoding.PEM))
    _write_key(key_path, key)
    return cert, key_path


def issue_client_cert(ca_cert: Path, ca_key: Path, directory: Path, name: str, group: str) -> tuple[Path, Path]:
    """Write `<name>.crt`/`<name>.key`, a client cert for user `name` in `group`, signed by that CA."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, issuer_key = _load_ca(ca_cert, ca_key)
    key = ec.generate_private_key(ec.SECP256R1())
    client = _cert(name, key, ca, issuer_key, usage=ExtendedKeyUsageOID.CLIENT_AUTH, group=group)
    cert, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert.write_bytes(client.public_bytes(serialization.Encoding.PEM))
    _write_key(key_path, key)
    return cert, key_path


@dataclass(frozen=True)
class FrontProxyPki:
    """The aggregation layer's own CA and the client cert kube-apiserver presents to extension API servers."""

    ca_cert: Path
    client_cert: Path
    client_key: Path
    client_name: str


def make_front_proxy_pki(directory: Path) -> FrontProxyPki:
    """A CA of its own (not the cluster's client CA: its certs would pass as the proxy) and the proxy's client cert."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = FrontProxyPki(
        ca_cert=directory / "front-proxy-ca.crt",
        client_cert=directory / "front-proxy-client.crt",
        client_key=directory / "front-proxy-client.key",
        client_name="front-proxy-client",
    )
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("paddlecloud-test-front-proxy-ca", ca_key, None, ca_key)
    key = ec.generate_private_key(ec.SECP256R1())
    client = _cert(pki.client_name, key, ca, ca_key, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    pki.ca_cert.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pki.client_cert.write_bytes(client.public_bytes(serialization.Encoding.PEM))
    _write_key(pki.client_key, key)
    return pki
