# The MLflow tracking server: the official image plus the PostgreSQL driver and boto3,
# which it needs for a PostgreSQL backend store and S3 artifacts.
FROM ghcr.io/mlflow/mlflow:v3.17.2

ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 HOME=/home/mlflow

RUN pip install --no-cache-dir psycopg2-binary==2.9.13 boto3==1.43.11 \
    && useradd --create-home --home-dir /home/mlflow --uid 10002 mlflow

USER 10002:10002
EXPOSE 5000
ENTRYPOINT ["mlflow", "server"]
CMD ["--host", "0.0.0.0", "--port", "5000"]
